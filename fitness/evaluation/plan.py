"""What every command that judges kernels is given (``JudgePlan``): the part of a command's one typed plan that the
fitness layer reads. ``kernelevo.plans`` makes it once from the composed config; ``fitness.evaluation.from_config``
resolves it (the device, the hardware profile, the problem at the device's sizes) into an evaluator's parts."""
from __future__ import annotations

from dataclasses import dataclass

from fitness.comparison.policy import PrecisionPolicy
from fitness.settings import EvalSettings, ProblemSettings


@dataclass(frozen=True)
class JudgePlan:
    """The problem, how it is judged (the ``fitness`` settings and the precision policy) and on what."""
    problem: ProblemSettings
    settings: EvalSettings
    policy: PrecisionPolicy
    device: str = "auto"  # auto, cpu, cuda, cuda:N (``device``)
    profile: str = "auto"  # a hardware profile's name, or auto (``hardware.profile``)
