"""Issue 66, point 1: prompts teach, they do not tell. Every prompt of every role and template, rendered for test
problems of every kind (memory bound with no FLOPs counted, a GEMM reduced to one column as KernelBench's level2/14
and level2/18 do, a compute-bound GEMM), carries no text of a known solution; the cost model says what bounds this
problem and which kinds of change could beat it, in general terms. The problem's own source (the user's reference,
shown as it is) is left out of the scan: the test problems' comments name their rewrites."""
import re
from pathlib import Path
from dataclasses import replace
from types import SimpleNamespace

import pytest

from conftest import PROBLEMS, SCALE_SHIFT
from kernelevo.core.genome import Genome
from fitness.problems.problem import resolve_problem
from fitness.problems.target import target_for
from hardware_profiles import load_profile
from llm_fakes import GOOD, INTERPRETED, PARENT_GENOME, PLAN, ind
from operators.llm.context import ContextBuilder, ContextSettings
from operators.llm.figures import judged_inputs
from operators.llm.team import LLMTeam, TeamSettings

# text of known solutions (KernelBench level2/14 and level2/18: the sum over a GEMM's output as x . colsum(W)), and
# names of KernelBench problems, none of which a prompt may carry
FORBIDDEN = ("colsum", "col_sum", "column sum", "sum of the columns", "sum_h", "W^T", "x . ", "rowsum",
             "level1/", "level2/", "level3/", "kernelbench")
GPU = {"timer": "cuda-events", "device": "cuda:0", "sizes": {}, "hardware_profile": "h100_sxm"}
PROFILE = {"kernels": [{"name": "scale_shift_kernel", "launches": 1, "time_s": 2e-6, "dram_pct": 40.0,
                        "sm_pct": 10.0, "occupancy_pct": 50.0, "top_stalls": [["long_scoreboard", 3.0]]}],
           "total": {"launches": 1, "time_s": 2e-6}, "measured_s": 9e-6}


class Recorder:
    """A client that keeps every request and answers by role (a plan, or the parent kernel as code or one edit)."""

    def __init__(self):
        self.requests = []

    def complete(self, messages, role, temperature=None, model=None, sample=0):
        self.requests.append((role, messages))
        text = PLAN if role == "planner" else (
            "<<<<<<< SEARCH\nBLOCK = 128\n=======\nBLOCK = 256\n>>>>>>> REPLACE" if "SEARCH/REPLACE" in
            messages[-1]["content"] else f"```python\n{GOOD}```")
        return SimpleNamespace(text=text, finish_reason="stop")


def every_prompt(problem: str, device: str) -> list[tuple[str, str]]:
    """(role, text) of every prompt the team sends for `problem`: system and user messages of the planner (with
    profiler metrics and a history), the coder in both edit formats, the debugger, the crossover and both
    initialisers."""
    spec = resolve_problem(problem, size_preset="test")
    tgt = target_for(spec, device, load_profile("h100_sxm"), tf32=True)
    source = Path(spec.path).read_text()
    where = GPU if device.startswith("cuda") else INTERPRETED
    parent = ind("1.0", PARENT_GENOME, 0.02, parents=("0.0",), note=PLAN, where=where)
    archive = (ind("0.0", PARENT_GENOME.with_params({"BLOCK": 64}), 0.03, "seed", where=where), parent,
               ind("2.0", Genome.from_source(GOOD.replace("x * scale", "scale * x")), 0.01, parents=("1.0",),
                   note=PLAN, where=where),
               ind("2.1", PARENT_GENOME, None, parents=("1.0",), note=PLAN, status="incorrect", where=where))
    recorder = Recorder()
    for edit_format in ("file", "diff"):
        team = LLMTeam(recorder, ContextBuilder(ContextSettings(), tgt, source, judged_inputs(spec)),
                       TeamSettings(edit_format=edit_format), {"name": "triton", "description": "fp32"},
                       tuner_trials=4)
        team.plan(parent, archive, profiles={"parent 1.0": PROFILE}, rank=3)
        team.plan(parent, archive, rank=2, independent=True)
        team.code(parent, PLAN)
        failed = replace(parent.result, status="runtime_error", reason="NameError: undefined_thing")
        team.debug(GOOD, failed, parent, PLAN, archive, {"parent 1.0": PROFILE})
        team.crossover(parent, archive[2])
        team.initialise()
        team.initialise(GOOD, "seed", parent.result)
    return [(role, message["content"]) for role, messages in recorder.requests for message in messages]


def without_reference(text: str) -> str:
    return re.sub(r"## PyTorch reference\n```python\n.*?\n```", "", text, flags=re.S)


@pytest.mark.parametrize("problem, device", [(SCALE_SHIFT, "cpu"), (str(PROBLEMS / "gemm_sum.py"), "cpu"),
                                             ("matmul", "cpu"), (str(PROBLEMS / "gemm_sum.py"), "cuda:0")])
def test_no_prompt_of_any_role_carries_solution_text(problem, device):
    prompts = every_prompt(problem, device)
    roles = {role for role, _ in prompts}
    assert roles == {"planner", "coder", "debugger", "crossover", "initialiser"}
    assert any("SEARCH/REPLACE" in text for _, text in prompts) and any("Profiler metrics" in t for _, t in prompts)
    for role, text in prompts:
        scanned = without_reference(text).lower()
        found = [fragment for fragment in FORBIDDEN if fragment.lower() in scanned]
        assert not found, f"{role} prompt for {problem} carries {found}:\n{text}"


def test_the_cost_model_names_what_bounds_this_problem_in_general_terms():
    def cost_text(problem):
        return next(text for role, text in every_prompt(problem, "cpu") if role == "initialiser"
                    and "## Problem at full size" in text)

    no_flops = cost_text(SCALE_SHIFT)  # memory bound, only bytes counted: nothing about removing FLOPs
    assert "Only bytes are counted here" in no_flops and "fewer FLOPs" not in no_flops
    assert "moving fewer bytes" in no_flops and "down to the data floor" in no_flops
    gemm = cost_text("matmul")  # compute bound: fewer FLOPs may beat the roofline, said in general terms
    assert "compute bound" in gemm and "a kernel that computes the same outputs with fewer FLOPs" in gemm
    assert "exact rewrite of the reference's algebra" in gemm and "(e.g." not in gemm
