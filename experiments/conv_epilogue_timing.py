"""Fused against unfused level-2 convolution seeds on a GPU, without the search (issue 62, item 2): for each
problem, torch.compile's code is captured once as policy `triton` captures it (GEMM templates, TF32), converted
twice (kernelevo's convolution with Inductor's pointwise kernel after it, and with that kernel fused into it as its
epilogue: kernelevo/seeds/inductor/epilogues.py, or a reduction over each pixel's channels after it as a reducing
epilogue: reductions.py), both checked against the reference and timed with
triton.testing.do_bench, with eager PyTorch and torch.compile (TF32 on, as policy `triton`'s baselines run) in the
same process. Each seed runs at its launch parameters' defaults (no tuning): the fused one's convolution writes the
output's final layout, so a tuned run may pick other tiles.

    python3 experiments/conv_epilogue_timing.py --root KernelBench/level2 --out OUT.json 1 2 4 5 7
    python3 experiments/conv_epilogue_timing.py --table OUT.json
    python3 experiments/conv_epilogue_timing.py ... --set C0_BLOCK_M=64 25 32   # a seed constant, in both seeds

A reduction's tile holds every channel (BLOCK_N up to 256 for KernelBench's 128 channels): its default BLOCK_M
(128) may be too many rows for the registers; --set tries another without the search.

Problems are given by number (level2/<n>_*.py) or path. Needs torch, triton and this repository only.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _module(source: str, folder: Path, name: str):
    path = folder / f"{name}.py"
    path.write_text(source)
    loader = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def constants_set(source: str, settings: list[str]) -> str:
    """`source` with each NAME=VALUE of `settings` as its constant's value (``NAME = ...`` at the top)."""
    for setting in settings:
        name, value = setting.split("=", 1)
        lines = [line for line in source.splitlines() if line.startswith(f"{name} = ")]
        if len(lines) != 1:
            raise SystemExit(f"--set {setting}: the seed has no constant {name} (its C<n>_*/K<n>_* names)")
        source = source.replace(lines[0] + "\n", f"{name} = {value}\n", 1)
    return source


def one(path: Path, folder: Path, reps: int, settings: list[str]) -> dict:
    import torch
    import triton.testing

    from fitness.problems.problem import call_get_init_inputs, call_get_inputs, load_problem, resolve_problem
    from kernelevo.seeds.inductor import capture
    from kernelevo.seeds.inductor.convert import convert

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    spec = resolve_problem(str(path))
    captured = capture(spec, "cuda", templates=True, tf32=True)
    sources = {label: constants_set(convert(captured, path.read_text(), spec.name, triton_convolutions=True,
                                            tf32=True, epilogues=label == "fused"), settings)
               for label in ("unfused", "fused")}
    row = {"problem": path.stem, "fused_epilogues": sources["fused"].count("epilogue=triton_"),
           "fused_reductions": sources["fused"].count("epilogue_reduces=True"), "set": settings}
    problem = load_problem(spec)
    torch.manual_seed(0)
    reference = problem.Model(*call_get_init_inputs(problem)).cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in call_get_inputs(problem)]
    runs = {"eager": reference}
    for label, source in sources.items():
        model = _module(source, folder, f"{path.stem.split('_')[0]}_{label}").ModelNew(
            *call_get_init_inputs(problem)).cuda().eval()
        model.load_state_dict(reference.state_dict())
        runs[label] = model
    runs["compile"] = torch.compile(reference)
    with torch.no_grad():
        expected = reference(*inputs)
        for label, fn in runs.items():
            got = fn(*inputs)
            row[f"{label}_max_abs_err"] = float((got - expected).abs().max())
            row[f"{label}_ms"] = triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=reps)
    row["fused_speedup"] = row["unfused_ms"] / row["fused_ms"]
    row["fused_vs_compile"] = row["compile_ms"] / row["fused_ms"]
    return row


def table(rows: list[dict]) -> str:
    lines = ["| problem | epilogues fused (reductions) | unfused ms | fused ms | fused speedup | eager ms | "
             "compile ms | fused vs compile | fused max abs err |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['problem']} | failed: {r['error'][:150]} | | | | | | | |")
            continue
        name = r["problem"] + (f" ({', '.join(r['set'])})" if r.get("set") else "")
        lines.append(f"| {name} | {r['fused_epilogues']} ({r.get('fused_reductions', 0)}) | {r['unfused_ms']:.3f} | "
                     f"{r['fused_ms']:.3f} | {r['fused_speedup']:.2f}x | {r['eager_ms']:.3f} | {r['compile_ms']:.3f} | "
                     f"{r['fused_vs_compile']:.2f}x | {r['fused_max_abs_err']:.2e} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="/work/shared/kernelbench/level2", help="KernelBench's level2 folder")
    parser.add_argument("--out", default="")
    parser.add_argument("--reps", type=int, default=200, help="do_bench's rep (ms)")
    parser.add_argument("--table", default="", help="print the markdown table of an OUT.json")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a seed constant's value in both seeds (C0_BLOCK_M=64), repeatable")
    parser.add_argument("problems", nargs="*")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())), end="")
        return
    rows, folder = [], Path(tempfile.mkdtemp(prefix="kernelevo-epilogues-"))
    for name in args.problems:
        path = Path(name) if name.endswith(".py") else next(Path(args.root).glob(f"{name}_*.py"))
        try:
            rows.append(one(path, folder, args.reps, args.set))
        except Exception as exc:  # noqa: BLE001 - a row with its reason; the others go on
            rows.append({"problem": path.stem, "error": f"{type(exc).__name__}: {exc}"[:600],
                         "trace": traceback.format_exc()[-1500:]})
        print(json.dumps(rows[-1])[:700], flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows), end="")


if __name__ == "__main__":
    main()
