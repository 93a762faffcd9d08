"""Inductor's Triton GEMM templates against the library's GEMM (cuBLAS) at KernelBench's sizes: one row a problem,
each path's median time, TFLOP/s and fraction of the library's speed. GPU only::

    python3 experiments/gemm_templates.py --kernelbench PATH/TO/KernelBench --out $OUT/gemm_templates.json \\
        --problems 'level1/2_*,level1/3_*'

Paths, all with TF32 allowed as under policy ``triton``: ``library`` (the module as eager PyTorch runs it);
``templates`` (torch.compile max-autotune over Triton's GEMM templates only, as the capture's seeds are made:
``kernelevo.seeds.inductor.template_choices.TEMPLATE_OPTIONS``); ``persistent_tma`` (the same with Inductor's persistent
TMA template offered too); ``split_k`` (the same as ``templates`` with the capture's own decompositions, so a long K is
split: ``TEMPLATE_DECOMPOSITIONS``). Each compiled path's output is compared with the library's. Times:
``triton.testing.do_bench``'s median in ms. The JSON is rewritten after each row, so a call cut short keeps what it
measured.
"""
from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernelevo.seeds.inductor.decompositions import capture_decompositions  # noqa: E402
from kernelevo.seeds.inductor.template_choices import TEMPLATE_DECOMPOSITIONS, TEMPLATE_OPTIONS, present  # noqa: E402

PATHS = {"templates": {}, "persistent_tma": {"triton.enable_persistent_tma_matmul": True},
         "split_k": {"decompositions": TEMPLATE_DECOMPOSITIONS}}


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compiled(model, options: dict):
    from torch._inductor import config
    from torch._inductor.compile_fx import compile_fx

    own = options.get("decompositions")
    inductor = {**TEMPLATE_OPTIONS, **{k: v for k, v in options.items() if k != "decompositions"},
                "max_autotune": True}

    def backend(graph, inputs):
        with config.patch(present(inductor, config)):
            return compile_fx(graph, inputs, decompositions=capture_decompositions(**own) if own else None)

    torch._dynamo.reset()
    return torch.compile(model, backend=backend, fullgraph=True)


def row_for(name: str, path: Path, rep: int) -> dict:
    problem = load(path)
    model = problem.Model(*problem.get_init_inputs()).cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    from torch.utils.flop_counter import FlopCounterMode
    with torch.no_grad():
        with FlopCounterMode(display=False) as counter:
            expected = model(*inputs)
        flops = counter.get_total_flops()
        row = {"problem": name, "gflop": flops / 1e9}
        ms = triton.testing.do_bench(lambda: model(*inputs), rep=rep)
        row["library"] = {"ms": ms, "tflops": flops / ms / 1e9}
        for label, options in PATHS.items():
            started = time.perf_counter()
            try:
                run = compiled(model, options)
                got = run(*inputs)
                scale = expected.abs().max().item() or 1.0
                error = ((got - expected).abs().max() / scale).item()
                ms = triton.testing.do_bench(lambda: run(*inputs), rep=rep)
                row[label] = {"ms": ms, "tflops": flops / ms / 1e9, "of_library": row["library"]["ms"] / ms,
                              "max_rel_error": error, "compile_s": round(time.perf_counter() - started, 1)}
            except Exception as exc:  # noqa: BLE001 - one path failing leaves the others
                row[label] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            print(name, label, row[label], flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", required=True)
    parser.add_argument("--problems", required=True, help="comma-separated globs of level/file names")
    parser.add_argument("--out", required=True)
    parser.add_argument("--rep", type=int, default=50)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    root = Path(args.kernelbench)
    names = sorted(f"{p.parent.name}/{p.name}" for p in root.glob("level*/*.py"))
    chosen = [n for n in names if any(fnmatch.fnmatch(n, g.strip()) for g in args.problems.split(","))]
    rows = []
    for name in chosen:
        rows.append(row_for(name, root / name, args.rep))
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                              "triton": triton.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
