"""Builds an Evaluator from a Hydra config (the `fitness`, `hardware` and problem fields)."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from fitness.evaluator import EvalSettings, Evaluator, default_device
from fitness.policy import PrecisionPolicy
from fitness.problem import ProblemSpec, resolve_problem
from hardware_profiles import HardwareProfile, load_profile, resolve_profile


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return default_device()
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={requested} but no GPU is visible; use device=auto or device=cpu "
                         f"(Triton's CPU interpreter)")
    if requested != "cpu" and not requested.startswith("cuda"):
        raise ValueError(f"unknown device {requested!r}; use auto, cpu, cuda or cuda:N")
    return requested


def resolve_size_preset(preset: str, device: str, problem: str) -> str:
    """`auto` means full sizes on a GPU and the bundled CPU test sizes on the interpreter."""
    if preset != "auto":
        return preset
    if device.startswith("cuda"):
        return "full"
    from fitness.problem import suite_names

    return "test" if problem in suite_names() else "full"


INDUCTOR = "inductor"  # problem.seed value: start from the Triton kernels torch.compile generates


def problem_spec(name: str, sizes, size_preset: str, device: str, seed: str | None = None) -> ProblemSpec:
    """The ProblemSpec a config names: bundled name or path, size preset and overrides, optional seed file."""
    sizes = OmegaConf.to_container(sizes, resolve=True) if isinstance(sizes, DictConfig) else dict(sizes or {})
    spec = resolve_problem(str(name), sizes=sizes, size_preset=resolve_size_preset(size_preset, device, str(name)))
    if seed is None or seed == INDUCTOR:
        return spec  # the Inductor seed is made when the run starts (operators.inductor_seed)
    if not Path(seed).expanduser().is_file():
        raise ValueError(f"seed kernel file {seed!r} not found; problem.seed must name a module defining ModelNew, "
                         f"or be '{INDUCTOR}' (start from torch.compile's Triton kernels)")
    return ProblemSpec(spec.name, spec.path, spec.sizes, str(Path(seed).expanduser().resolve()), spec.size_preset)


def problem_from_config(problem_cfg: DictConfig, device: str) -> ProblemSpec:
    """The spec for a `problem` config group entry (name, size_preset, sizes, seed)."""
    return problem_spec(problem_cfg.name, problem_cfg.get("sizes"), problem_cfg.get("size_preset", "auto"), device,
                        problem_cfg.get("seed"))


def policy_from_config(fitness_cfg: DictConfig) -> PrecisionPolicy:
    return PrecisionPolicy.from_dict(OmegaConf.to_container(fitness_cfg.policy, resolve=True))


def settings_from_config(fitness_cfg: DictConfig) -> EvalSettings:
    data = OmegaConf.to_container(fitness_cfg, resolve=True)
    data.pop("policy", None)
    return EvalSettings.from_config(data)


def profile_for(profile_name: str, device: str) -> HardwareProfile:
    """`auto` on the CPU is the interpreter's profile; otherwise the named or detected GPU profile."""
    if device == "cpu" and profile_name == "auto":
        return load_profile("cpu_interpreter")
    return resolve_profile(profile_name)


def build_evaluator(cfg: DictConfig) -> Evaluator:
    device = resolve_device(str(cfg.get("device", "auto")))
    profile = profile_for(cfg.hardware.profile, device)
    problem = problem_from_config(cfg.problem, device)
    return Evaluator(problem, policy_from_config(cfg.fitness), profile,
                     settings_from_config(cfg.fitness), device=device)


def read_candidate(path: str | None, problem: ProblemSpec) -> tuple[str, str]:
    """The candidate's source and a label: a file, or the problem's bundled seed when no path is given."""
    if path is None:
        return problem.seed_source(), "seed"
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"candidate file {path!r} not found; pass candidate=PATH to a module defining ModelNew, "
                         f"or leave it out to evaluate the problem's bundled seed")
    return file.read_text(), file.name
