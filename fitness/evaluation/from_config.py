"""An evaluator's parts resolved from a command's judge plan (``fitness.evaluation.plan.JudgePlan``: the problem,
fitness, hardware and device settings): the device, the hardware profile, the problem at the device's sizes."""
from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path

from kernelevo.core.errors import KernelevoError
from fitness.evaluation.evaluator import EvalSettings, Evaluator, default_device, sandbox_options
from fitness.evaluation.plan import JudgePlan
from fitness.comparison.policy import PrecisionPolicy
from fitness.problems.problem import INDUCTOR, ProblemSpec, resolve_problem
from fitness.settings import ProblemSettings
from fitness.workers.pool import SANDBOXES, Lease
from hardware_profiles import HardwareProfile, load_profile, resolve_profile


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return default_device()
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise KernelevoError(f"device={requested} but no GPU is visible; use device=auto or device=cpu "
                             f"(Triton's CPU interpreter)")
    if requested != "cpu" and not requested.startswith("cuda"):
        raise KernelevoError(f"unknown device {requested!r}; use auto, cpu, cuda or cuda:N")
    return requested


def resolve_size_preset(preset: str, device: str) -> str:
    """`auto` means full sizes on a GPU and the test sizes on the interpreter (a bundled problem's hand-picked ones,
    a file's by the shrink rule of fitness/problems/sizes.py)."""
    if preset != "auto":
        return preset
    return "full" if device.startswith("cuda") else "test"


def problem_spec(problem: ProblemSettings, device: str) -> ProblemSpec:
    """The ProblemSpec the `problem` settings name: bundled name or path, size preset and overrides, optional seed
    file."""
    seed = problem.seed
    spec = resolve_problem(str(problem.name), sizes=dict(problem.sizes or {}),
                           size_preset=resolve_size_preset(problem.size_preset, device))
    if seed is None or seed == INDUCTOR:
        return spec  # the Inductor seed is made when the run starts (kernelevo.seeds.inductor)
    if not Path(seed).expanduser().is_file():
        raise KernelevoError(f"seed kernel file {seed!r} not found; problem.seed must name a module defining ModelNew, "
                             f"or be '{INDUCTOR}' (start from torch.compile's Triton kernels)")
    check_seed_file(seed)
    return replace(spec, seed_path=str(Path(seed).expanduser().resolve()))


def check_seed_file(seed: str) -> None:
    """A seed file that is not Python text is refused before anything runs, naming the line and the fix."""
    fix = f"fix the file, or set problem.seed={INDUCTOR} to start from torch.compile's Triton kernels"
    try:
        ast.parse(Path(seed).expanduser().read_text(encoding="utf-8"), filename=seed)
    except UnicodeDecodeError:
        raise KernelevoError(f"problem.seed={seed} is not UTF-8 text; {fix}") from None
    except SyntaxError as exc:
        raise KernelevoError(f"problem.seed={seed}: line {exc.lineno}: {exc.msg}; {fix}") from None


def profile_for(profile_name: str, device: str) -> HardwareProfile:
    """`auto` on the CPU is the interpreter's profile; otherwise the named or detected GPU profile."""
    if device == "cpu" and profile_name == "auto":
        return load_profile("cpu_interpreter")
    return resolve_profile(profile_name)


@dataclass(frozen=True)
class FitnessParts:
    """What an evaluator is built from, as a config gives it."""
    device: str
    profile: HardwareProfile
    problem: ProblemSpec  # at the device's sizes
    policy: PrecisionPolicy
    settings: EvalSettings


def fitness_parts(judge: JudgePlan) -> FitnessParts:
    """The device, hardware profile, problem, policy and settings a judge plan names. Raises KernelevoError naming the
    fix."""
    device = resolve_device(str(judge.device))
    return FitnessParts(device, profile_for(judge.profile, device), problem_spec(judge.problem, device), judge.policy,
                        judge.settings)


def check_fitness_config(judge: JudgePlan) -> ProblemSpec:
    """What an evaluator would be built from, checked without starting anything; the problem spec. Raises
    KernelevoError naming the fix."""
    from fitness.problems.problem import check_reference, load_problem

    parts = fitness_parts(judge)
    # the file defines Model, get_inputs, get_init_inputs; its size overrides exist; its reference works (forward
    # run on the interpreter, at the test sizes): a problem's fault is never blamed on a candidate
    check_reference(load_problem(parts.problem), run_forward=parts.device == "cpu")
    return parts.problem


def leased_evaluator(judge: JudgePlan) -> tuple[Evaluator, Lease]:
    """The judge's evaluator, running its jobs in a sandbox leased from the process's pool (``fitness.workers.pool``:
    a warm fork server where an earlier command of this process gave an equal one back), and the lease, for the
    caller to end (`keep`: the command completed)."""
    parts = fitness_parts(judge)
    lease = SANDBOXES.lease(parts.device, **sandbox_options(parts.settings, parts.profile, parts.device))
    try:
        return Evaluator(parts.problem, parts.policy, parts.profile, parts.settings, device=parts.device,
                         sandbox=lease.sandbox), lease
    except BaseException:
        lease.end(keep=False)
        raise


def read_candidate(path: str | None, problem: ProblemSpec) -> tuple[str, str]:
    """The candidate's source and a label: a file, or the problem's bundled seed when no path is given."""
    if path is None:
        if problem.seed_path is None:
            raise KernelevoError(f"problem {problem.name!r} has no seed kernel of its own: pass candidate=PATH (a "
                                 f"module defining ModelNew), e.g. torch.compile's kernels converted by `kernelevo "
                                 f"seed problem={problem.path} out=seed.py`")
        return problem.seed_source(), "seed"
    file = Path(path).expanduser()
    if file.is_dir():
        raise KernelevoError(f"candidate={path} is a directory; pass candidate=PATH to a Python file defining ModelNew")
    if not file.is_file():
        raise KernelevoError(f"candidate file {path!r} not found; pass candidate=PATH to a module defining ModelNew, "
                             f"or leave it out to evaluate the problem's bundled seed")
    try:
        return file.read_text(encoding="utf-8"), file.name
    except UnicodeDecodeError as exc:
        raise KernelevoError(f"candidate file {path!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                             f"{exc.start}): is it a binary? pass a Python source file defining ModelNew") from None
