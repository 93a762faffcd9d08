"""Leaves the process with exit code 0 in the middle of the evaluation."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        os._exit(0)
