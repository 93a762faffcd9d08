"""Inductor seeds on the GPU, without the search (issue: compiler seeds): for each problem, capture and convert
torch.compile's kernels (kernelevo/seeds/inductor), run the seed against the reference and time seed, eager and
torch.compile with triton.testing.do_bench (a quick check; the evaluator's timer is the reference method).

    python3 experiments/inductor_seeds.py --out OUT.json layernorm row_softmax path/to/KernelBench/level1/23_Softmax.py
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def check(name: str, cache: Path) -> dict:
    import torch
    import triton.testing

    from fitness.problems.problem import call_get_init_inputs, call_get_inputs, load_problem, resolve_problem
    from kernelevo.seeds.inductor import inductor_seed

    spec = resolve_problem(name)
    started = time.time()
    source = inductor_seed(spec, "cuda", "gpu", cache, torch_compute_allowed=True)
    row = {"problem": spec.name, "convert_s": round(time.time() - started, 1), "lines": source.count("\n")}
    module_file = cache / f"check_{spec.name}.py"
    module_file.write_text(source)
    loader = importlib.util.spec_from_file_location(f"check_{spec.name}", module_file)
    seed = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(seed)
    problem = load_problem(spec)
    torch.manual_seed(0)
    reference = problem.Model(*call_get_init_inputs(problem)).cuda().eval()
    candidate = seed.ModelNew(*call_get_init_inputs(problem)).cuda().eval()
    candidate.load_state_dict(reference.state_dict())
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in call_get_inputs(problem)]
    with torch.no_grad():
        expected, got = reference(*inputs), candidate(*inputs)
        row["max_abs_err"] = float((got - expected).abs().max())
        compiled = torch.compile(reference)
        compiled(*inputs)
        for label, fn in (("seed", candidate), ("eager", reference), ("compile", compiled)):
            row[f"{label}_ms"] = triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=100)
    row["seed_vs_compile"] = row["compile_ms"] / row["seed_ms"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("problems", nargs="+")
    args = parser.parse_args()
    rows, cache = [], Path(tempfile.mkdtemp(prefix="kernelevo-seeds-"))
    for name in args.problems:
        try:
            rows.append(check(name, cache))
        except Exception as exc:  # noqa: BLE001 - a row with its reason; the others go on
            rows.append({"problem": name, "error": f"{type(exc).__name__}: {exc}"[:600],
                         "trace": traceback.format_exc()[-1500:]})
        print(json.dumps(rows[-1])[:700], flush=True)
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
