"""Precision policies: the named rules a candidate's output is judged by, written into every result.

A policy fixes the tolerances per dtype, whether TF32 is allowed (for the candidate and, to keep speed-ups honest,
for the eager / torch.compile baselines), whether torch compute ops inside ``forward`` are rejected or only
labelled, and the narrowest operands an fp32 problem's kernels may use (checked in their source). The policies
themselves are YAML files beside this module, in ``policies/`` (the config group ``fitness/policy``, registered
from them by ``kernelevo.config.groups``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from kernelevo.core.errors import KernelevoError
from kernelevo.core.records import from_record

TORCH_COMPUTE_MODES = ("reject", "label")
FP32_OPERANDS = ("any", "tf32", "ieee")


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    max_rel_l2: float | None = None  # bound on ||out - ref|| / ||ref|| over the whole output
    # added to max_rel_l2 x ||ref|| (absolute): never in a policy; the reference's own rounding, K x ||ref - exact||,
    # where the second opinion (fitness.judge.rounding) compares against a float64 reference
    l2_slack: float = 0.0


@dataclass(frozen=True)
class PrecisionPolicy:
    name: str
    description: str
    tolerances: dict = field(default_factory=dict)  # dtype name ("float32", ...) or "default" -> Tolerance
    tf32: bool = False
    torch_compute: str = "reject"
    extra_allowed_ops: tuple = ()
    # the narrowest operands a kernel of an fp32 problem may compute with, checked in its source
    # (fitness.judge.precision_check): any, tf32 (no fp16 / bf16 / fp8), ieee (and every tl.dot in IEEE fp32)
    fp32_operands: str = "any"

    def __post_init__(self):
        if self.torch_compute not in TORCH_COMPUTE_MODES:
            raise KernelevoError(f"policy {self.name!r}: torch_compute must be one of {TORCH_COMPUTE_MODES}, "
                                 f"got {self.torch_compute!r}")
        if self.fp32_operands not in FP32_OPERANDS:
            raise KernelevoError(f"policy {self.name!r}: fp32_operands must be one of {FP32_OPERANDS}, "
                                 f"got {self.fp32_operands!r}")
        if "default" not in self.tolerances:
            raise KernelevoError(f"policy {self.name!r}: tolerances need a 'default' entry")

    def tolerance_for(self, dtype) -> Tolerance:
        key = str(dtype).replace("torch.", "")
        return self.tolerances.get(key, self.tolerances["default"])

    @property
    def fp32_matmul_precision(self) -> str:
        """torch.set_float32_matmul_precision value for baselines under this policy."""
        return "high" if self.tf32 else "highest"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["extra_allowed_ops"] = list(self.extra_allowed_ops)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "PrecisionPolicy":
        data = dict(data)
        data["tolerances"] = {k: v if isinstance(v, Tolerance) else Tolerance(**v)
                              for k, v in dict(data.get("tolerances", {})).items()}
        data["extra_allowed_ops"] = tuple(data.get("extra_allowed_ops") or ())
        return from_record(cls, data, f"the precision policy {data.get('name', '')}".rstrip())


def policy_dir() -> Path:
    """The policies' folder: one YAML file per policy, its name the option's (``fitness/policy=NAME``)."""
    return Path(__file__).resolve().parent / "policies"


def available_policies() -> list[str]:
    return sorted(p.name.removesuffix(".yaml") for p in policy_dir().iterdir() if p.name.endswith(".yaml"))


def load_policy(name: str) -> PrecisionPolicy:
    """A named policy from its file, policies/<name>.yaml."""
    import yaml

    path = policy_dir() / f"{name}.yaml"
    if not path.is_file():
        raise KernelevoError(f"unknown precision policy {name!r}; choose one of {available_policies()}")
    return PrecisionPolicy.from_dict(yaml.safe_load(path.read_text()))


def named_for_overrides(policy: PrecisionPolicy) -> PrecisionPolicy:
    """`policy`, named for what it changes of the policy file it names: ``triton+tf32=false`` for policy triton with
    ``fitness.policy.tf32=false``, so a result never carries a policy's name for rules it was not judged by (the
    description is not a rule). Unchanged where it is its file, or names no file."""
    if policy.name not in available_policies():
        return policy
    changed = _changes(load_policy(policy.name).to_dict(), policy.to_dict())
    return replace(policy, name="+".join([policy.name, *changed])) if changed else policy


def _changes(named: dict, given: dict, prefix: str = "") -> list[str]:
    """``key=value`` for each rule of `given` that differs from `named` (nested keys joined by dots)."""
    out = []
    for key in sorted(set(named) | set(given)):
        if not prefix and key in ("name", "description"):
            continue
        a, b = named.get(key), given.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _changes(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}={str(b).lower() if isinstance(b, bool) else b}")
    return out
