"""How long torch.compile's capture may take, and how its code becomes a seed: ``inductor.*`` of a command's config
(``kernelevo/config/schema.py``'s ``InductorConfig`` adds the variants). No torch import: the command line reads this
before anything heavy."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kernelevo.core.errors import KernelevoError


@dataclass
class CaptureSettings:
    """The capture's time (kernelevo.seeds.inductor.capture_variants): the default capture keeps its own limit
    (``kernelevo.seeds.inductor.CAPTURE_TIMEOUT_S``); Inductor's variants after it share `variants_budget_s`."""
    # seconds the variants after the default capture share, from the default's end (from the capture process's
    # start when the default is cached): the process is then stopped and the variants not finished are left out,
    # said in a line (the default seed and every variant finished before are kept and cached); unbounded, a network's
    # captures can outlast a bench's time per problem (bench.backend.timeout_s; docs/measurements.md)
    variants_budget_s: float = 240.0
    # the default capture autotunes Inductor's GEMM and convolution templates (policy triton on a GPU) only for a graph
    # with at most this many distinct matmuls and convolutions (shapes, strides, dtypes, arguments: Inductor
    # benchmarks each distinct one once); a larger one (a network) gets each template's first configuration,
    # unbenchmarked, and its max_autotune variant autotunes them within the budget above (a network's autotuned
    # default capture takes minutes: docs/measurements.md). null: always
    autotune_templates_up_to: Optional[int] = 12
    # torch.compile's capture with dynamic shapes (every size an argument, as far as Dynamo and the converter keep
    # it: the seed then reads its sizes from its inputs, and its guard checks only what stayed specialised; else the
    # sizes as literals). null: off a GPU only, where candidates are judged at the interpreter's test sizes; true: on a
    # GPU too (not yet measured on one: its seeds' speed at the problem's sizes and Inductor's autotuning with symbolic
    # sizes are unknown, so a GPU stays static by default); false: never
    dynamic_shapes: Optional[bool] = None
    # under policy triton, the pointwise kernel Inductor runs over a convolution's output is fused into kernelevo's
    # convolution as its epilogue where that is its only role (kernelevo/seeds/inductor/epilogues.py); false: the seed
    # keeps it
    # as a launch of its own (the unfused seed, for comparisons)
    fuse_epilogues: bool = True

    def __post_init__(self):
        if self.autotune_templates_up_to is not None and self.autotune_templates_up_to < 0:
            raise KernelevoError(f"inductor.autotune_templates_up_to={self.autotune_templates_up_to}: the most matmuls "
                                 f"and convolutions a default capture autotunes must be 0 or more (null: no limit)")
        if not self.variants_budget_s > 0:
            raise KernelevoError(f"inductor.variants_budget_s={self.variants_budget_s}: the seconds Inductor's "
                                 f"variants share must be more than 0 (inductor=none captures no variant)")
