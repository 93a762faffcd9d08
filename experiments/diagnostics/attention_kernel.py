"""kernelevo's Triton flash attention (kernelevo/seeds/kernels/attention.py) on a GPU: does it compile and compute what
torch's
SDPA does at KernelBench's shapes, and how far is it from the library's attention (issue 43: the attention seed)?
Only its interpreter runs were checked when it was written (tests/seeds/test_attention_seed.py).

    python3 experiments/diagnostics/attention_kernel.py --out OUT.json [--quick]    # about 10 minutes on an H100

Each case (level1/97's fp32 shape with its 1,024-wide head; level3/43's head of 96, causal; fp16/bf16 heads of 64
and 80, causal or not) runs ``flash_attention`` at its defaults and at each launch of a small sweep, checks it
against ``F.scaled_dot_product_attention`` on fp64 copies (max abs error, and whether it is within the dtype's
tolerance), and times it with ``triton.testing.do_bench`` next to ``F.scaled_dot_product_attention`` (the library's
flash / efficient / cuDNN kernel, as torch picks). A launch that fails to compile or run is a row with its error.
TF32 as policy ``triton`` allows it (the seed's ``tl.dot`` in TF32 for fp32 inputs: ``kernel_source(tf32=True)``)
is the ``tf32`` column's run of the same case.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# name: (batch, heads, query length, key length, head dim, dtype, causal)
CASES = {
    "level1/97 fp32 E=1024": (32, 32, 512, 512, 1024, "float32", False),
    "level3/43 fp32 E=96 causal": (128, 8, 512, 512, 96, "float32", True),
    "fp16 E=64": (8, 16, 1024, 1024, 64, "float16", False),
    "bf16 E=64 causal": (8, 16, 1024, 1024, 64, "bfloat16", True),
    "bf16 E=80": (8, 16, 1024, 1024, 80, "bfloat16", False),
}
SWEEP = {"BLOCK_M": [64, 128], "BLOCK_N": [32, 64], "VALUE_BLOCK": [64, 256], "num_warps": [4, 8]}  # 16 launches
TOLERANCE = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 2e-2}


def kernels(tf32: bool):
    """The flash_attention of the kernel file as a seed holds it (TF32 dot products where `tf32`)."""
    import importlib.util

    from kernelevo.seeds.inductor.attentions import kernel_source

    path = Path(tempfile.mkdtemp(prefix="attention-")) / f"attention_{'tf32' if tf32 else 'ieee'}.py"
    path.write_text("import torch\nimport triton\nimport triton.language as tl\n\n\n" + kernel_source(tf32))
    loader = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)  # @triton.jit reads its source from the file
    return module.flash_attention


def one(name: str, launches: list[dict]) -> list[dict]:
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench

    batch, heads, lq, lk, e, dtype, causal = CASES[name]
    torch.manual_seed(0)
    q = torch.randn(batch, heads, lq, e, device="cuda", dtype=getattr(torch, dtype))
    k, v = (torch.randn(batch, heads, lk, e, device="cuda", dtype=q.dtype) for _ in range(2))
    exact = F.scaled_dot_product_attention(q[:2].double(), k[:2].double(), v[:2].double(), is_causal=causal)
    library_ms = do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    rows = []
    for tf32 in ([False, True] if dtype == "float32" else [False]):
        attention = kernels(tf32)
        for launch in launches:
            row = {"case": name, "tf32": tf32, **launch, "library_ms": library_ms}
            try:
                out = attention(q, k, v, is_causal=causal, **launch)[0]
                error = (out[:2].double() - exact).abs().max().item()
                row.update(max_abs_err=error, correct=error <= TOLERANCE[dtype] * (100 if tf32 else 1),
                           ms=do_bench(lambda: attention(q, k, v, is_causal=causal, **launch)))
                row["vs_library"] = library_ms / row["ms"]
            except Exception as exc:  # noqa: BLE001 - a launch that cannot compile or run is a row with why
                row["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc) else ''}"
            print(json.dumps(row), flush=True)
            rows.append(row)
            torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="the defaults only, no sweep")
    args = parser.parse_args()
    sweep = [dict(zip(SWEEP, values)) for values in itertools.product(*SWEEP.values())]
    launches = [{}] + ([] if args.quick else sweep)
    rows = []
    for name in CASES:
        rows += one(name, launches)
        Path(args.out).write_text(json.dumps(rows, indent=1))
    for name in CASES:
        ok = [r for r in rows if r["case"] == name and r.get("correct")]
        best = min(ok, key=lambda r: r["ms"]) if ok else None
        print(f"{name}: {len(ok)} of {sum(r['case'] == name for r in rows)} launches correct; "
              + (f"best {best['ms']:.3f} ms ({best['vs_library']:.2f}x the library's {best['library_ms']:.3f} ms) at "
                 f"{ {k: best[k] for k in SWEEP if k in best} or 'the defaults'}, tf32={best['tf32']}" if best
                 else "none correct"))


if __name__ == "__main__":
    main()
