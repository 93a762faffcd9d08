"""Does Inductor write faster Triton under other code-generation options than its defaults? (issue: compiler seeds)

Measure before building: each problem's Model is compiled by torch.compile under each named variant of Inductor's
configuration (those of conf/inductor/variants.yaml, which a run captures as seeds, and a few more), checked
against eager, and timed with ``triton.testing.do_bench`` (median, L2 flushed) against the default compile in the
same process. One process per
problem, ``--jobs`` at once; every first call (Inductor's autotuning) and every timing holds one GPU file lock.

    python3 experiments/diagnostics/inductor_variants.py --root KB --list LIST --jobs 3 --out OUT.json
    python3 experiments/diagnostics/inductor_variants.py --table OUT.json
"""
from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
LOCK = "/tmp/kernelevo-inductor-variants.lock"

# name -> Inductor options: the variants a run captures (conf/inductor/variants.yaml), then others measured here
EXPLORED = {
    "force_cooperative": {"triton": {"cooperative_reductions": True, "force_cooperative_reductions": True}},
    "no_split_reductions": {"split_reductions": False},
    "no_mix_order": {"triton": {"mix_order_reduction": False}},
    "autotune_pointwise": {"max_autotune_pointwise": True},
}


def _variants() -> dict:
    import yaml

    shipped = yaml.safe_load((REPO / "conf" / "inductor" / "variants.yaml").read_text())["variants"]
    return {"default": {}, **shipped, **EXPLORED}


VARIANTS = _variants()


@contextmanager
def gpu_lock():
    with open(LOCK, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def max_error(got, expected, chunk: int = 1 << 26) -> tuple[float, bool]:
    """Largest |got - expected| and whether all lie within atol=rtol=1e-2 (KernelBench's), compared in chunks."""
    import torch

    got, expected = got.reshape(-1), expected.reshape(-1)
    worst, ok = 0.0, True
    for start in range(0, expected.numel(), chunk):
        g, e = got[start:start + chunk].float(), expected[start:start + chunk].float()
        worst = max(worst, (g - e).abs().max().item())
        ok = ok and bool(torch.isclose(g, e, atol=1e-2, rtol=1e-2).all())
    return worst, ok


def one_problem(path: str, variants: list[str]) -> dict:
    import torch
    import torch._inductor.config as inductor_config
    from triton.testing import do_bench

    from fitness.problems.problem import call_get_init_inputs, call_get_inputs, load_problem, resolve_problem
    from kernelevo.seeds.inductor.capture import flat_options

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    problem = load_problem(resolve_problem(path))
    torch.manual_seed(0)
    model = problem.Model(*call_get_init_inputs(problem)).cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in call_get_inputs(problem)]
    row = {"problem": path, "variants": {}}
    with torch.no_grad(), gpu_lock():
        expected = model(*inputs)
        row["eager_ms"] = do_bench(lambda: model(*inputs), return_mode="median")
    for name in variants:
        torch._dynamo.reset()
        started = time.time()
        try:  # an option this torch lacks fails the patch: the row says which
            with inductor_config.patch({"fx_graph_cache": False, **flat_options(VARIANTS[name])}), torch.no_grad():
                compiled = torch.compile(model, fullgraph=True)
                with gpu_lock():
                    got = compiled(*inputs)
                    compile_s = time.time() - started
                    error, ok = max_error(got, expected)
                    del got
                    ms = do_bench(lambda: compiled(*inputs), return_mode="median")
            row["variants"][name] = {"ms": ms, "compile_s": compile_s, "max_error": error, "correct": ok}
        except Exception as exc:  # noqa: BLE001 - a variant Inductor cannot build is a row with its reason
            row["variants"][name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        print(f"[variants] {path} {name}: {row['variants'][name]}", flush=True)
    return row


def run_all(args) -> list[dict]:
    paths = [line.strip() for line in Path(args.list).read_text().splitlines() if line.strip()]
    out = Path(args.out)

    def child(path: str) -> dict:
        row_file = out.with_name(f"{out.stem}.{Path(path).stem}.row.json")
        cmd = [sys.executable, __file__, "--one", str(Path(args.root) / path), "--variants", args.variants,
               "--row", str(row_file)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s)
        sys.stdout.write(done.stdout)
        if done.returncode or not row_file.is_file():
            return {"problem": path, "error": (done.stderr or done.stdout).strip()[-600:]}
        return {**json.loads(row_file.read_text()), "problem": path}

    rows = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(child, paths):
            rows.append(row)
            out.write_text(json.dumps(rows, indent=1))  # what is done so far survives a cut
    return rows


def table(rows: list[dict]) -> str:
    names = [n for n in VARIANTS if any(n in r.get("variants", {}) for r in rows)]
    lines = ["| problem | eager (ms) | default compile (ms) | " + " | ".join(names[1:]) + " |",
             "|---" * (len(names) + 2) + "|"]
    for row in rows:
        got = row.get("variants", {})
        base = got.get("default", {}).get("ms")
        cells = []
        for name in names[1:]:
            v = got.get(name, {})
            if "ms" not in v:
                cells.append("error" if v else "-")
            else:
                mark = "" if v["correct"] else " (wrong)"
                cells.append(f"{base / v['ms']:.2f}x{mark}" if base else f"{v['ms']:.3f} ms{mark}")
        eager = f"{row['eager_ms']:.3f}" if "eager_ms" in row else row.get("error", "-")[:80]
        default = f"{base:.3f}" if base else "-"
        lines.append(f"| {row['problem']} | {eager} | {default} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root"), parser.add_argument("--list"), parser.add_argument("--out")
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--timeout-s", type=float, default=540)
    parser.add_argument("--one"), parser.add_argument("--row"), parser.add_argument("--table")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
    elif args.one:
        Path(args.row).write_text(json.dumps(one_problem(args.one, args.variants.split(","))))
    else:
        print(table(run_all(args)))


if __name__ == "__main__":
    main()
