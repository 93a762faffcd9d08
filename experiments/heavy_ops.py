"""kernelevo's convolution (kernelevo/seeds/kernels/conv.py) against the library's (cuDNN) at KernelBench's own sizes,
one row a
problem: each path's time, TFLOP/s and GB/s, and its fraction of the library's speed. GPU only::

    python3 experiments/heavy_ops.py --kernelbench PATH/TO/KernelBench --out $OUT/heavy_ops.json \\
        --problems 'level1/*conv*'

Each problem's module is built from its file (``Model(*get_init_inputs())``, inputs from ``get_inputs()``, on the
GPU); its one convolution module is timed as the library runs it (``module(x)``, TF32 allowed as under policy
``triton``) and as ``conv_nd`` runs it with TF32 dot products (the kernel file's dots switched to TF32 as
``kernelevo.seeds.inductor.convolutions.kernel_source(tf32=True)`` does), over the launch parameters of ``--tiles`` (the
best kept; the search tunes them further). Every output is compared with the library's first (relative to its largest
magnitude). Times: ``triton.testing.do_bench``'s median in ms. The JSON is rewritten after each problem, so a call
cut short keeps what it measured.
"""
from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton
import triton.testing

KERNEL_FILE = Path(__file__).resolve().parent.parent / "kernelevo" / "seeds" / "kernels" / "conv.py"
# BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, CHANNELS_LAST, W_PHASES: the implicit GEMM's (W_PHASES=0, rows
# gathered, only for a transposed convolution); the depthwise kernel's tile is BLOCK_N / 16 rows by 2 * BLOCK_M columns
# (conv_nd's docstring)
GEMM_TILES = ("128x128x32x8x3x1x1,128x64x32x4x3x1x1,64x128x32x4x3x1x1,128x128x16x8x4x1x1,128x64x32x4x3x0x1,"
              "128x128x32x8x3x0x1,128x64x32x4x3x0x0,128x128x32x8x3x0x0")
DEPTHWISE_TILES = "128x64x0x4x1x0x1,32x256x0x4x1x0x1,64x128x0x4x1x0x1,256x32x0x4x1x0x1,128x128x0x8x1x0x1"


def tf32_conv():
    """conv.py with its dot products in TF32, imported from a file of its own (triton.jit reads its source)."""
    text = KERNEL_FILE.read_text().replace('input_precision="ieee"', 'input_precision="tf32"')
    path = Path(tempfile.mkdtemp()) / "conv_tf32.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("conv_tf32", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_problem(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def convolution_of(model):
    convs = [m for m in model.modules() if isinstance(m, torch.nn.modules.conv._ConvNd)]
    if len(convs) != 1:
        raise ValueError(f"{len(convs)} convolution modules: this table takes problems with one")
    return convs[0]


def work(conv, x, out) -> tuple[float, float]:
    """The convolution's FLOPs (2 per multiply-add of the taps that exist) and the bytes it must move at least."""
    c_in_g = conv.in_channels // conv.groups
    c_out_g = conv.out_channels // conv.groups
    taps = math.prod(conv.kernel_size)
    flops = 2.0 * (x.numel() * c_out_g * taps if conv.transposed else out.numel() * c_in_g * taps)
    size = x.element_size()
    return flops, size * (x.numel() + out.numel() + conv.weight.numel())


def row_for(name: str, path: Path, conv_module, tiles: dict, rep: int) -> dict:
    problem = load_problem(path)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = problem.Model(*problem.get_init_inputs())
        inputs = problem.get_inputs()
    conv = convolution_of(model)
    x = inputs[0].cuda()
    with torch.no_grad():
        expected = conv(x)
    flops, moved = work(conv, x, expected)
    library_ms = triton.testing.do_bench(lambda: conv(x), rep=rep)
    c_in_g = conv.in_channels // conv.groups
    depthwise = conv_module.depthwise_path(c_in_g, conv.transposed)
    arguments = (x, conv.weight.detach(), None if conv.bias is None else conv.bias.detach(), conv.stride,
                 conv.padding, conv.dilation, conv.transposed, conv.output_padding, conv.groups)
    row = {"problem": name, "path": "depthwise" if depthwise else "implicit GEMM", "x": list(x.shape),
           "weight": list(conv.weight.shape), "stride": list(conv.stride), "groups": conv.groups,
           "gflop": flops / 1e9, "mb_moved": moved / 1e6, "library_ms": library_ms, "tiles": {}}
    scale = expected.abs().max().item() or 1.0
    for tile in tiles["depthwise" if depthwise else "gemm"]:
        block_m, block_n, block_k, warps, stages, channels_last, w_phases = tile
        if not (w_phases or conv.transposed):
            continue  # the same launch as with W_PHASES=1
        launch = dict(BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages,
                      **({} if depthwise else {"BLOCK_K": block_k, "CHANNELS_LAST": channels_last,
                                               "W_PHASES": w_phases}))
        key = "x".join(map(str, tile))
        try:
            got = conv_module.conv_nd(*arguments, **launch)
            error = (got - expected).abs().max().item() / scale
            if not error < 1e-2:
                raise AssertionError(f"max error {error:.3g} of the output's largest magnitude")
            row["tiles"][key] = {"ms": triton.testing.do_bench(lambda: conv_module.conv_nd(*arguments, **launch),
                                                               rep=rep), "error": error}
        except Exception as exc:  # noqa: BLE001 - one launch that fails leaves the others
            row["tiles"][key] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    timed = {k: v["ms"] for k, v in row["tiles"].items() if "ms" in v}
    if timed:
        best = min(timed, key=timed.get)
        row.update(best_tile=best, kernelevo_ms=timed[best], fraction_of_library=library_ms / timed[best])
    for who in ("library", "kernelevo"):
        if f"{who}_ms" in row:
            row[f"{who}_tflops"] = flops / row[f"{who}_ms"] / 1e9
            row[f"{who}_gbs"] = moved / row[f"{who}_ms"] / 1e6
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", required=True, help="the KernelBench folder holding level1/ ... level3/")
    parser.add_argument("--problems", default="level1/*conv*", help="comma-separated globs of level/file names")
    parser.add_argument("--out", required=True)
    parser.add_argument("--gemm-tiles", default=GEMM_TILES)
    parser.add_argument("--depthwise-tiles", default=DEPTHWISE_TILES)
    parser.add_argument("--rep", type=int, default=60, help="do_bench's rep (ms) for each timing")
    args = parser.parse_args()
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True  # as under policy triton
    root = Path(args.kernelbench)
    paths = sorted({p for glob in args.problems.split(",") for p in root.glob("level*/*.py")
                    if fnmatch.fnmatch(f"{p.parent.name}/{p.name}", glob.strip())},
                   key=lambda p: (p.parent.name, int(p.name.split("_")[0])))
    tiles = {kind: [tuple(int(v) for v in t.split("x")) for t in spec.split(",")]
             for kind, spec in (("gemm", args.gemm_tiles), ("depthwise", args.depthwise_tiles))}
    conv_module = tf32_conv()
    rows = []
    for path in paths:
        name, started = f"{path.parent.name}/{path.name}", time.perf_counter()
        try:
            row = row_for(name, path, conv_module, tiles, args.rep)
        except Exception as exc:  # noqa: BLE001 - one problem that fails leaves the others
            row = {"problem": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        row["wall_s"] = round(time.perf_counter() - started, 1)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "tiles"}), flush=True)
        Path(args.out).write_text(json.dumps(rows, indent=1))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
