"""Stands in for a kernel whose build never ends: on import it says it is building one (the stage the worker writes
while Triton builds a kernel, fitness.common.stage.CompileStage) and sleeps. The CPU interpreter builds nothing, so this
is how a test meets the compile time limit there (with the static check off: it imports fitness)."""
import time

import torch.nn as nn

from fitness.common.stage import COMPILE_STAGE, stage

stage(f"{COMPILE_STAGE}: build 1, endless_kernel (num_warps=1)")
time.sleep(120)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x
