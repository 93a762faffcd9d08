"""One call to judge a kernel against a problem, for a notebook or a script (as KernelBench's
``eval_kernel_against_ref`` is): ``judge_source``. It is the evaluator of ``kernelevo evaluate``, not a second
pipeline: the same plan (``JudgePlan``), the same evaluator (``fitness.evaluation.evaluator.Evaluator``) in a sandbox
leased from the process's pool (``fitness.workers.pool``: a later call of the same process finds its fork server
warm), the same ``EvalResult``.

Usage::

    from fitness.evaluation.notebook import judge_source
    from fitness.measure.verdict_text import summary

    result = judge_source("row_softmax", open("my_kernel.py").read(), policy="triton")
    print(summary(result))
"""
from __future__ import annotations

from pathlib import Path

from fitness.comparison.policy import PrecisionPolicy, load_policy
from fitness.evaluation.from_config import leased_evaluator
from fitness.evaluation.plan import JudgePlan
from kernelevo.core.evaluation_record import EvalResult
from fitness.settings import EvalSettings, ProblemSettings


def judge_source(problem: str | Path, source: str, policy: str | PrecisionPolicy = "triton", device: str = "auto",
                 *, profile: str = "auto", size_preset: str = "auto", sizes: dict | None = None,
                 settings: EvalSettings | None = None, timed: bool = True, label: str = "") -> EvalResult:
    """The verdict on `source` (a module defining ``ModelNew``) for `problem` (a bundled problem's name or a
    KernelBench-format file's path), judged under the precision policy `policy` (a name of fitness/comparison/policies/,
    or a ``PrecisionPolicy``) on `device` (auto, cpu: Triton's CPU interpreter, cuda, cuda:N) with the hardware profile
    `profile`. `size_preset` and `sizes` are ``problem.size_preset`` and ``problem.sizes`` (auto: full sizes on a GPU,
    the test sizes on the interpreter); `settings` the ``fitness.*`` settings (their defaults when None); `timed` False
    judges correctness only (``Evaluator.correctness``). Never raises for anything the candidate does; raises
    ``KernelevoError`` for a problem, policy, device or profile that does not exist."""
    plan = JudgePlan(problem=ProblemSettings(name=str(problem), size_preset=size_preset, sizes=dict(sizes or {})),
                     settings=settings or EvalSettings(),
                     policy=policy if isinstance(policy, PrecisionPolicy) else load_policy(policy),
                     device=device, profile=profile)
    evaluator, lease = leased_evaluator(plan)
    completed = False
    try:
        with evaluator:
            result = evaluator.evaluate(source, label) if timed else evaluator.correctness(source, label)
        completed = True
    finally:
        lease.end(keep=completed)  # a verdict given: its fork server serves the process's next call
    return result
