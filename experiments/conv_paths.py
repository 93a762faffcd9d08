"""kernelevo's convolution (kernelevo/seeds/kernels/conv.py) against torch's (cuDNN) at KernelBench's full sizes, each
path of
conv_nd timed apart: the direct path (``conv_direct_kernel``, where a group's GEMM is too small for tl.dot), the
implicit GEMM forced (``direct=False``), and what ``conv_nd`` picks by itself. GPU only (the interpreter would take
hours at these sizes); every output is checked against torch's first::

    python3 experiments/conv_paths.py --out $OUT/conv_paths.json     # about 2 minutes on an H200

Cases: level1/84 (depthwise 3x3, 64 x 128 x 256 x 512: the H200 bench's template seed ran 2.215 s, torch.compile's
cuDNN 7.58 ms, eager 10.05 ms) and level2/96's transposed convolution (128 x 3 -> 16, 16 x 32 x 32, k 3, stride 2,
padding 1: its evaluations were killed at 120 s). Times are triton.testing.do_bench's median, in ms; fp32, IEEE dot
products (no TF32), as policy strict-fp32 runs them. Only launch parameters given by --tiles are tried; the search
tunes them further.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernelevo.seeds.kernels.conv import conv_nd  # noqa: E402

CASES = {  # x shape, weight shape, stride, padding, dilation, transposed, output_padding, groups
    "level1/84 depthwise 3x3": ((64, 128, 256, 512), (128, 1, 3, 3), (1, 1), (0, 0), (1, 1), False, (0, 0), 128),
    "level2/96 transposed 3->16": ((128, 3, 16, 32, 32), (3, 16, 3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), True,
                                   (0, 0, 0), 1),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tiles", default="64x32x4,128x32x4,256x16x8,128x64x8",
                        help="BLOCK_M x BLOCK_N x num_warps launch parameters to try, comma-separated")
    args = parser.parse_args()
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    tiles = [tuple(int(v) for v in t.split("x")) for t in args.tiles.split(",")]
    rows = []
    for name, (x_shape, w_shape, *conv_args) in CASES.items():
        torch.manual_seed(0)
        x, w = torch.rand(x_shape, device="cuda"), torch.randn(w_shape, device="cuda") / 3
        expected = torch.convolution(x, w, None, *conv_args)
        row = {"case": name, "torch_ms": triton.testing.do_bench(lambda: torch.convolution(x, w, None, *conv_args))}
        for path, direct in (("auto", None), ("direct", True), ("gemm", False)):
            for block_m, block_n, warps in tiles:
                def run():
                    return conv_nd(x, w, None, *conv_args, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps,
                                   direct=direct)
                key = f"{path} {block_m}x{block_n}x{warps}"
                try:
                    torch.testing.assert_close(run(), expected, atol=1e-3, rtol=1e-3)
                    row[key] = triton.testing.do_bench(run)
                except Exception as exc:  # noqa: BLE001 - one configuration that fails leaves the others
                    row[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                print(name, key, row[key], "torch", round(row["torch_ms"], 3), flush=True)
        rows.append(row)
        Path(args.out).write_text(json.dumps(rows, indent=1))  # after each case: a call cut short keeps the rest


if __name__ == "__main__":
    main()
