"""How far Inductor's Triton GEMM templates are from cuBLAS on this GPU, by autotuning search space (issue: compiler
seeds): the compiler seeds of the plain matmul problems run at 0.21-0.31x torch.compile's cuBLAS call. Is that the
template itself, or the configuration max-autotune picked from its default list?

    python3 experiments/diagnostics/gemm_template_gap.py --out OUT.json [--size 4096] [--variants
    default,exhaustive,persistent]

Each variant compiles `a @ b` (fp32, TF32 allowed as policy `triton` allows) with max-autotune over Triton only, in
a fresh process (Inductor's caches off), and is timed with `triton.testing.do_bench` next to `torch.mm` (cuBLAS).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

VARIANTS = {
    "default": {},
    "exhaustive": {"max_autotune_gemm_search_space": "EXHAUSTIVE"},
    "persistent": {"triton.enable_persistent_tma_matmul": True},
}


def one(variant: str, size: int) -> dict:
    import torch
    import torch._inductor.config as config
    from triton.testing import do_bench

    torch.backends.cuda.matmul.allow_tf32 = True
    config.fx_graph_cache = False
    config.autotune_local_cache = False
    config.max_autotune_gemm = True
    config.max_autotune_gemm_backends = "TRITON"
    for key, value in VARIANTS[variant].items():
        target, _, name = key.rpartition(".")
        setattr(getattr(config, target) if target else config, name, value)
    a, b = (torch.randn(size, size, device="cuda") for _ in range(2))
    start = time.time()
    compiled = torch.compile(lambda x, y: x @ y)
    compiled(a, b)
    torch.cuda.synchronize()
    compile_s = time.time() - start
    flops = 2 * size ** 3
    triton_ms, cublas_ms = do_bench(lambda: compiled(a, b)), do_bench(lambda: torch.mm(a, b))
    return {"variant": variant, "size": size, "compile_s": compile_s, "triton_ms": triton_ms, "cublas_ms": cublas_ms,
            "triton_tflops": flops / triton_ms / 1e9, "cublas_tflops": flops / cublas_ms / 1e9,
            "vs_cublas": cublas_ms / triton_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--timeout-s", type=float, default=300)
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.size)), flush=True)
        return
    rows = []
    for variant in args.variants.split(","):
        try:
            done = subprocess.run([sys.executable, __file__, "--one", variant, "--size", str(args.size)],
                                  capture_output=True, text=True, timeout=args.timeout_s)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            row = json.loads(lines[-1]) if lines else {"variant": variant, "error": done.stderr[-800:]}
        except subprocess.TimeoutExpired:
            row = {"variant": variant, "error": f"did not finish within {args.timeout_s:g} s"}
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
