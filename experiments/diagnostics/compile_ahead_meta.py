"""Compile ahead on meta tensors, the compile time limit, and how long Triton takes to build a tile too large for its
warps; on a GPU:

    python3 experiments/diagnostics/compile_ahead_meta.py [--out DIR] [--skip-sweep] [--skip-evaluator]

A. For each bundled seed at its full size, an Inductor seed of KernelBench's LogSoftmax (4096 x 393216 fp32), and
   the Inductor fixtures: the compile pass on a meta copy of the model and meta inputs
   (``fitness.judge.compile_ahead``): its outcome, the kernels it built, the device memory it took, and the kernels the
   first real call then still had to build (0: the meta pass built exactly what the real call uses); against the device
   memory the pass took on a device copy and real inputs.
B. Seconds to compile a looped log-softmax row kernel (Inductor's shape) as R0_BLOCK / (num_warps * 32) grows, each
   build in a process of its own under a time limit, beside what ``hardware_profiles.limits`` predicts.
C. The evaluator end to end: the row_softmax seed ("ahead", ok), and the same seed with BLOCK_SIZE=65536 and one
   warp under fitness.compile_timeout_s=10 (status compile_timeout).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

LOG_SOFTMAX = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.log_softmax(x, dim=self.dim)

batch_size = 4096
dim = 393216

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''
SWEEP_KERNEL = '''
import sys, time
import torch, triton, triton.language as tl

@triton.jit
def log_softmax_rows(x_ptr, y_ptr, n_cols, R0_BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, R0_BLOCK)
    m = tl.full([R0_BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, R0_BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        m = tl.maximum(m, x)
    top = tl.max(m, 0)
    s = tl.zeros([R0_BLOCK], tl.float32)
    for start in range(0, n_cols, R0_BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        s += tl.exp(x - top)
    lse = top + tl.log(tl.sum(s, 0))
    for start in range(0, n_cols, R0_BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=start + cols < n_cols, other=0.0)
        tl.store(y_ptr + row * n_cols + start + cols, x - lse, mask=start + cols < n_cols)

block, warps = int(sys.argv[1]), int(sys.argv[2])
x = torch.empty(4, 393216, device="cuda")
started = time.perf_counter()
log_softmax_rows.warmup(x, x, 393216, R0_BLOCK=block, grid=(4,), num_warps=warps)
print(time.perf_counter() - started)
'''
SWEEP = [(1024, 4), (4096, 16), (8192, 16), (8192, 8), (16384, 8), (65536, 16), (65536, 8), (65536, 4), (8192, 1),
         (65536, 2), (65536, 1)]


def start_sweep(folder: Path, limit_s: float) -> list:
    script = folder / "sweep_kernel.py"
    script.write_text(SWEEP_KERNEL)
    runs = []
    for block, warps in SWEEP:
        env = {**os.environ, "TRITON_CACHE_DIR": str(folder / f"cache-{block}-{warps}")}
        proc = subprocess.Popen(["timeout", str(limit_s), sys.executable, str(script), str(block), str(warps)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        runs.append((block, warps, proc))
    return runs


def finish_sweep(runs: list, limit_s: float) -> list:
    from hardware_profiles import load_profile
    from hardware_profiles.limits import limit_violation

    h100, rows = load_profile("h100_sxm"), []
    for block, warps, proc in runs:
        out, _ = proc.communicate()
        lines = out.strip().splitlines()
        seconds = float(lines[-1]) if proc.returncode == 0 and lines else None
        rows.append({"R0_BLOCK": block, "num_warps": warps, "per_thread": block // (warps * 32),
                     "compile_s": seconds, "timed_out": proc.returncode == 124, "limit_s": limit_s,
                     "error": "" if seconds is not None or proc.returncode == 124 else out[-300:],
                     "predicted": limit_violation({"K0_XBLOCK": 1, "K0_R0_BLOCK": block, "K0_NUM_WARPS": warps}, h100)})
        print(f"[sweep] R0_BLOCK={block} warps={warps}: {block // (warps * 32)} per thread, "
              f"{'timeout' if rows[-1]['timed_out'] else seconds} s, refused: {bool(rows[-1]['predicted'])}",
              flush=True)
    return rows


def meta_pass_rows(folder: Path) -> list:
    import torch

    from fitness.judge.candidate import build_model, load_candidate
    from fitness.judge.compile_ahead import compile_ahead, copy_model, meta_pass, compile_pass
    from fitness.judge.guards import LaunchCounter
    from fitness.judge.inputs import make_inputs, meta_inputs
    from fitness.problems.problem import call_get_init_inputs, load_problem, resolve_problem
    from kernelevo.seeds.inductor import capture
    from kernelevo.seeds.inductor.convert import convert

    counter, builds = LaunchCounter(), []
    counter.install()
    counter.on_compile = lambda name: builds.append(name) if name else None
    cases = [(name, resolve_problem(name), None) for name in
             ("row_softmax", "layernorm", "rmsnorm", "sum_reduction", "matmul", "small_attention", "maxpool2d")]
    log_softmax = folder / "log_softmax.py"
    log_softmax.write_text(LOG_SOFTMAX)
    cases.append(("log_softmax (Inductor)", resolve_problem(str(log_softmax)), "inductor"))
    for fixture in sorted((REPO / "tests" / "fixtures" / "inductor").glob("*.json")):
        captured = json.loads(fixture.read_text())
        spec = resolve_problem(captured["fixture"]["problem"], sizes=captured["fixture"]["sizes"])
        cases.append((f"fixture {fixture.stem}", spec, captured))
    rows = []
    for name, spec, inductor in cases:
        row = {"case": name}
        try:
            if inductor == "inductor":
                started = time.time()
                inductor = capture(spec, "cuda")
                row["capture_s"] = round(time.time() - started, 1)
            source = (convert(inductor, Path(spec.path).read_text(), spec.name, interpreter=False) if inductor
                      else spec.seed_source())
            problem = load_problem(spec)
            module = load_candidate(source, folder)
            model = build_model(module.ModelNew, call_get_init_inputs(problem), 0, "cuda")
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            builds.clear()
            started = time.perf_counter()
            with torch.no_grad():
                how = compile_pass(meta_pass(model, lambda: meta_inputs(problem)), lambda: None, counter)
            row.update(meta_pass=how, meta_builds=len(builds), meta_s=round(time.perf_counter() - started, 2),
                       meta_peak_bytes=torch.cuda.max_memory_allocated() - base)
            torch.cuda.reset_peak_memory_stats()
            with torch.no_grad():
                device_how = compile_ahead(copy_model(model), make_inputs(problem, 1, "cuda"), counter)
            row.update(device_pass=device_how, device_peak_bytes=torch.cuda.max_memory_allocated() - base)
            inputs = make_inputs(problem, 2, "cuda")
            builds.clear()
            with torch.no_grad():
                model(*inputs)
            torch.cuda.synchronize()
            row["first_call_builds"] = len(builds)
            del inputs, model
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001 - report and go on
            row["error"] = f"{type(exc).__name__}: {exc}"[:600]
        print(f"[meta] {json.dumps(row)}", flush=True)
        rows.append(row)
    return rows


def evaluator_rows() -> list:
    from fitness.evaluation.evaluator import EvalSettings, Evaluator
    from fitness.comparison.policy import load_policy
    from fitness.problems.problem import resolve_problem
    from hardware_profiles import resolve_profile

    spec = resolve_problem("row_softmax")
    good = spec.seed_source()
    bad = good.replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 65536").replace("NUM_WARPS = 4", "NUM_WARPS = 1")
    settings = EvalSettings(trials=2, baselines=["eager"], compile_timeout_s=10.0, timeout_s=300.0)
    rows = []
    with Evaluator(spec, load_policy("triton"), resolve_profile("auto"), settings, device="cuda") as ev:
        for label, source in (("seed", good), ("BLOCK_SIZE=65536, one warp", bad)):
            result = ev.evaluate(source, label=label)
            rows.append({"label": label, "status": result.status, "reason": result.reason[:600],
                         "compile_pass": result.guards.get("compile_pass"), "wall_s": round(result.eval_wall_s, 1),
                         "phases_s": {k: round(v, 2) for k, v in result.phases_s.items()}})
            print(f"[evaluator] {json.dumps(rows[-1])}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(REPO / "experiments" / "results"))
    parser.add_argument("--sweep-limit-s", type=float, default=150.0)
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--skip-evaluator", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="compile-ahead-meta-"))
    sweep = [] if args.skip_sweep else start_sweep(folder, args.sweep_limit_s)
    import torch
    import triton

    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "meta_pass": meta_pass_rows(folder)}
    report["evaluator"] = [] if args.skip_evaluator else evaluator_rows()
    report["sweep"] = finish_sweep(sweep, args.sweep_limit_s)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compile_ahead_meta.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
