"""What ncu starts (``python -m fitness.workers.ncu_target JOB``, see ``fitness.workers.ncu``): one profiled forward
call of a candidate that already passed its evaluation.

The model is built and its inputs made as the judge makes them; forward runs once to compile its kernels, then
once between ``cudaProfilerStart`` and ``cudaProfilerStop`` (ncu runs with ``--profile-from-start off``), so the
profile holds exactly one call's kernels. Nothing is judged here: the candidate was judged before.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from fitness.judge.candidate import build_model, copy_parameters, load_candidate
from fitness.judge.inputs import make_inputs
from fitness.problems.problem import ProblemSpec, call_get_init_inputs, load_problem


def main(job_file: str) -> int:
    job = json.loads(Path(job_file).read_text())
    device, seed = job["device"], job["seed"]
    problem = load_problem(ProblemSpec.from_dict(job["problem"]))
    init_inputs = call_get_init_inputs(problem)
    module = load_candidate(job["source"], Path.cwd())
    reference = build_model(problem.Model, init_inputs, seed, device)
    model = build_model(module.ModelNew, init_inputs, seed, device)
    copy_parameters(reference, model)
    del reference
    inputs = make_inputs(problem, seed, device)
    with torch.no_grad():
        model(*inputs)  # compiles the kernels: not profiled
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
