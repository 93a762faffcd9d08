"""Regenerate the Inductor captures the CPU tests convert (tests/fixtures/inductor/): torch.compile's output for a
few problems at small sizes, captured on a GPU (so the tests see what Inductor writes for a GPU: its GEMM templates,
its reduction and scan helpers, libdevice calls), then converted and run through Triton's interpreter on the CPU.
With ``--device cpu``, the captures made on the CPU (``CPU_FIXTURES``: level-2 convolutions with their epilogues,
tests/seeds/test_conv_epilogues.py, test_conv_reductions.py) into tests/fixtures/inductor_cpu/.

    python3 experiments/inductor_fixtures.py [--device cpu] [--out tests/fixtures/inductor] [names...]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# name -> (problem: a bundled suite name or a path under the KernelBench root, sizes, GEMM templates). The tests
# convert the bundled ones (CI has no KernelBench checkout); the others show what the converter meets at full size.
FIXTURES = {
    "matmul_template": ("matmul", {"M": 64, "N": 64, "K": 64}, True),
    "matmul_bias_relu_template": ("matmul_bias_relu", {"batch_size": 32, "in_features": 64, "out_features": 64},
                                  True),
    "layernorm": ("layernorm", {"batch_size": 8, "dim": 256}, False),
    "row_softmax": ("row_softmax", {"batch_size": 8, "dim": 512}, False),
    "sum_reduction": ("sum_reduction", {"batch_size": 3, "dim1": 50, "dim2": 71}, False),
}

# name -> (problem file under tests/problems/, sizes, templates): captured on the CPU (TRITON_INTERPRET=1)
CPU_FIXTURES = {name: (f"tests/problems/{name}.py", {}, False)
                for name in ("conv_relu_bias", "convt_clamp_scale", "depthwise_tanh", "conv_mish", "conv_pool",
                             "conv_min_tanh", "convt_logsumexp", "convt_softmax")}


def main() -> None:
    from fitness.problems.problem import resolve_problem
    from kernelevo.seeds.inductor import capture

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="", help="a KernelBench checkout (its KernelBench/ folder)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--out", default="", help="default: tests/fixtures/inductor (cuda), inductor_cpu (cpu)")
    parser.add_argument("names", nargs="*", help=f"default: all of {sorted(FIXTURES)} (cuda), "
                                                 f"{sorted(CPU_FIXTURES)} (cpu)")
    args = parser.parse_args()
    fixtures = CPU_FIXTURES if args.device == "cpu" else FIXTURES
    out = Path(args.out or REPO / "tests" / "fixtures" / ("inductor_cpu" if args.device == "cpu" else "inductor"))
    out.mkdir(parents=True, exist_ok=True)
    for name in args.names or sorted(fixtures):
        problem, sizes, templates = fixtures[name]
        if "/" in problem and not args.root and args.device == "cuda":
            print(f"[fixtures] {name}: skipped (a KernelBench problem; pass --root)", flush=True)
            continue
        path = problem if "/" not in problem else str(REPO / problem) if args.device == "cpu" else \
            str(Path(args.root) / problem)
        started = time.time()
        try:
            captured = capture(resolve_problem(path, sizes=sizes), args.device, templates)
        except Exception as exc:  # noqa: BLE001 - report and go on with the others
            print(f"[fixtures] {name}: FAILED {type(exc).__name__}: {exc}"[:2000], flush=True)
            continue
        captured["fixture"] = {"problem": problem, "sizes": sizes, "templates": templates}
        (out / f"{name}.json").write_text(json.dumps(captured, indent=1) + "\n")
        print(f"[fixtures] {name}: {len(captured['kernels'])} kernel(s) in {time.time() - started:.0f} s",
              flush=True)


if __name__ == "__main__":
    main()
