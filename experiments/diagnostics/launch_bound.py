"""Is a kernel launch-bound? level3/34 (VanillaRNNHidden: 256 steps of cat, Linear, tanh, Linear at batch 8) ended
at 0.41-0.59x of max-autotune with Inductor's own kernels, max-autotune's among them, as its seeds
(experiments/results/kernelbench_part10/): the same kernels, launched from Python. For a candidate file and its
problem, on a GPU: the kernel launches per forward (counted by Triton's launch hook), the forward's time as the
judge takes it (queued back to back, CUDA events, median of rounds), and the same forward replayed from a CUDA graph
(the GPU's work alone: no launch from the host). The host's share is the difference, per launch. The same for the
eager reference (its CUDA kernels not counted). A diagnostic only: the judge refuses CUDA graphs in a candidate::

    python3 experiments/diagnostics/launch_bound.py --problem PROBLEM.py --candidate best_kernel.py \
        --out $OUT/launch_bound.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics

import torch


def module_of(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_ms(call, rounds: int = 7, calls: int = 10) -> float:
    """Median over `rounds` of the mean time of `calls` back-to-back calls, in ms (CUDA events)."""
    call()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def graph_ms(call) -> float:
    """The same work replayed from a CUDA graph captured once (after a warm-up on a side stream, as torch asks)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return timed_ms(graph.replay)


def triton_launches(call) -> int | None:
    """Triton kernel launches in one call (None: this Triton has no launch hook)."""
    try:
        from triton import knobs
    except ImportError:
        return None
    count = [0]
    knobs.runtime.launch_enter_hook = lambda *args: count.__setitem__(0, count[0] + 1)
    try:
        call()
        torch.cuda.synchronize()
    finally:
        knobs.runtime.launch_enter_hook = None
    return count[0]


def loaded(problem_path: str, candidate_path: str) -> tuple:
    """The problem's Model and the candidate's ModelNew with its weights, and the problem's inputs, on the GPU."""
    problem, candidate = module_of(problem_path, "problem"), module_of(candidate_path, "candidate")
    torch.manual_seed(0)
    reference = problem.Model(*problem.get_init_inputs()).cuda().eval()
    model = candidate.ModelNew(*problem.get_init_inputs()).cuda().eval()
    model.load_state_dict(reference.state_dict(), strict=False)
    return reference, model, [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]


def written(rows: dict, out: str | None) -> None:
    """Printed, and written to `out` when given."""
    text = json.dumps(rows, indent=1)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--out")
    args = parser.parse_args()
    reference, model, inputs = loaded(args.problem, args.candidate)
    rows = {}
    with torch.no_grad():
        expected, got = reference(*inputs), model(*inputs)
        rows["max_abs_difference"] = (expected - got).abs().max().item()
        for name, net in (("eager", reference), ("candidate", model)):
            call = (lambda net=net: net(*inputs))
            launched, graphed = timed_ms(call), graph_ms(call)
            launches = triton_launches(call) if name == "candidate" else None
            rows[name] = {"forward_ms": launched, "cuda_graph_ms": graphed, "triton_launches": launches,
                          "host_us_per_launch": (launched - graphed) * 1e3 / launches if launches else None}
    rows["device"] = torch.cuda.get_device_name()
    written(rows, args.out)


if __name__ == "__main__":
    main()
