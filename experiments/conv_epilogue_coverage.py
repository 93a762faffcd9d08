"""How many KernelBench level-2 convolution problems have an epilogue the converter fuses into kernelevo's
convolution (kernelevo/seeds/inductor/epilogues.py): each problem whose file builds an nn.Conv* / nn.ConvTranspose* is
captured (torch.compile, on --device; on the CPU at the interpreter's test sizes), converted under policy `triton` with
and without fusion, and the row says how many convolutions it has, how many took an epilogue, how many launches forward
makes fewer, and why each one left apart was left. Captures are kept in --cache (a rerun converts only).

    python3 experiments/conv_epilogue_coverage.py --root /work/shared/kernelbench/level2 --cache DIR --out OUT.json
    python3 experiments/conv_epilogue_coverage.py --table OUT.json > table.md
    python3 experiments/conv_epilogue_coverage.py ... --check --jobs 2   # each fused seed against the reference

On the CPU Inductor lays convolutions out channels-last and writes NCHW output in its epilogue (a 2D kernel); on a
GPU it peels the bias off into the epilogue: both forms fuse, but which problems fuse can differ between the two.
"""
from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CONV = re.compile(r"nn\.Conv(Transpose)?[123]d\(")


def calls(source: str) -> tuple[int, int, int]:
    """(kernel launches and conv_nd calls, conv_nd calls, those with an epilogue) in a seed's forward."""
    forward = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    convs = [n for n in ast.walk(forward) if isinstance(n, ast.Call) and ast.unparse(n.func) == "conv_nd"]
    kernels = [n for n in ast.walk(forward) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]
    return len(kernels) + len(convs), len(convs), sum(any(k.arg == "epilogue" for k in c.keywords) for c in convs)


def check(source: str, spec) -> float:
    """The largest difference of the seed's output from the reference's (same weights and inputs), relative to the
    reference's largest magnitude."""
    import importlib.util
    import tempfile

    import torch

    from fitness.problems.problem import call_get_init_inputs, call_get_inputs, load_problem

    with tempfile.TemporaryDirectory() as tmp:
        module_file = Path(tmp) / "seed_check.py"
        module_file.write_text(source)
        loader = importlib.util.spec_from_file_location("seed_check", module_file)
        seed = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(seed)
    problem = load_problem(spec)
    torch.manual_seed(0)
    reference = problem.Model(*call_get_init_inputs(problem)).eval()
    torch.manual_seed(0)
    model = seed.ModelNew(*call_get_init_inputs(problem)).eval()
    model.load_state_dict(reference.state_dict())
    inputs = call_get_inputs(problem)
    with torch.no_grad():
        expected = reference(*inputs)
        return ((expected - model(*inputs)).abs().max() / expected.abs().max().clamp_min(1e-30)).item()


def one(path: Path, cache: Path, device: str, checked: bool) -> dict:
    from fitness.problems.problem import resolve_problem
    from kernelevo.seeds.inductor import capture
    from kernelevo.seeds.inductor.convert import convert

    spec = resolve_problem(str(path), size_preset="test" if device == "cpu" else "full")
    row, file = {"problem": path.stem}, cache / f"{path.stem}.{device}.json"
    started = time.time()
    if not file.is_file():
        file.write_text(json.dumps(capture(spec, device)))
    captured = json.loads(file.read_text())
    refused = []
    handler = logging.Handler()
    handler.emit = lambda record: refused.append(record.getMessage())
    logger = logging.getLogger("kernelevo.seeds.inductor.epilogues")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        plain = convert(captured, path.read_text(), spec.name, triton_convolutions=True, epilogues=False)
        fused = convert(captured, path.read_text(), spec.name, triton_convolutions=True)
    finally:
        logger.removeHandler(handler)
    (launched, convs, _), (fused_launched, _, took) = calls(plain), calls(fused)
    row.update(convolutions=convs, fused=took, launches=launched, fused_launches=fused_launched, left=refused,
               seconds=round(time.time() - started, 1))
    if checked and took:  # the fused seed's output against the reference's (the unfused seed's is judged elsewhere)
        row.update(error_fused=check(fused, spec))
    return row


def safe_one(path: Path, cache: Path, device: str, checked: bool) -> dict:
    try:
        return one(path, cache, device, checked)
    except Exception as exc:  # noqa: BLE001 - a problem that fails is a row; the others go on
        return {"problem": path.stem, "why": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}


def table(rows: list[dict]) -> str:
    done = [r for r in rows if "fused" in r]
    took = [r for r in done if r["fused"]]
    checked = [r for r in took if "error_fused" in r]
    lines = [f"{len(took)} of {len(done)} level-2 convolution problems captured have an epilogue fused "
             f"({sum(r['fused'] for r in done)} of {sum(r['convolutions'] for r in done)} convolutions); "
             f"{len(rows) - len(done)} failed before conversion."
             + (f" The fused seed's largest error relative to the reference's largest magnitude, over the "
                f"{len(checked)} run: {max(r['error_fused'] for r in checked):.1e}." if checked else ""), "",
             "| problem | convolutions | fused | forward's launches, a conv_nd call as one (unfused -> fused) | "
             "fused seed's error | left apart, why |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "fused" not in r:
            lines.append(f"| {r['problem']} | | | | | failed: {r.get('why', '?')[:120]} |")
            continue
        why = "; ".join(sorted({w.split(": ", 1)[-1][:110] for w in r["left"]}))
        error = f"{r['error_fused']:.1e}" if "error_fused" in r else ""
        lines.append(f"| {r['problem']} | {r['convolutions']} | {r['fused']} | {r['launches']} -> "
                     f"{r['fused_launches']} | {error} | {why} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="/work/shared/kernelbench/level2")
    parser.add_argument("--cache", default="/tmp/conv_epilogue_captures")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default="")
    parser.add_argument("--check", action="store_true", help="run each fused seed against the reference")
    parser.add_argument("--jobs", type=int, default=1, help="problems at once (processes)")
    parser.add_argument("--table", default="", help="print the markdown table of an OUT.json")
    parser.add_argument("names", nargs="*", help="problem file stems (default: every convolution problem)")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())), end="")
        return
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    paths = sorted((p for p in Path(args.root).glob("*.py") if CONV.search(p.read_text())),
                   key=lambda p: int(p.stem.split("_")[0]))
    paths = [p for p in paths if not args.names or p.stem in args.names]
    paths = sorted(paths, key=lambda p: args.names.index(p.stem)) if args.names else paths  # in the order given
    rows = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(safe_one, path, cache, args.device, args.check) for path in paths]
        for future in futures:  # in the problems' order
            rows.append(future.result())
            print(json.dumps(rows[-1])[:400], flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
