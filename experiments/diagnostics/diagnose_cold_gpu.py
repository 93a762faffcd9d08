"""Why the first baselines of a freshly started machine read slow (issue: throughput): three times the first run of
a device call measured layernorm's eager and torch.compile baselines 1.2x and 1.9x slower than every later run,
while candidates timed seconds later in the same run read normal, and clearing the caches on a warm machine did not
reproduce it (``experiments/results/throughput/throughput_h100.md``, session 12). Is the GPU itself slow for a while
after the machine starts, and for how long?

    python3 experiments/diagnostics/diagnose_cold_gpu.py --out OUT.json [--seconds 40]

Run it as the first GPU work on a freshly started machine. From the first CUDA use, every ~0.5 s: a device-to-device
copy of 1 GiB (bandwidth), layernorm's eager forward at the bundled problem's size timed by the evaluator's timer
(a short one), and the SM clock, memory clock, power and performance state from nvidia-smi.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def smi() -> dict:
    fields = "clocks.sm,clocks.mem,power.draw,pstate,temperature.gpu,clocks_throttle_reasons.active"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.strip().split(", ")
        return dict(zip(fields.split(","), out))
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": str(exc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    start = time.time()
    import torch

    from fitness.judge.inputs import make_inputs
    from fitness.problems.problem import call_get_init_inputs, load_problem, resolve_problem
    from fitness.measure.timing import CudaEventTimer

    rows = [{"t": 0.0, "what": "before CUDA", **smi()}]
    loaded = load_problem(resolve_problem("layernorm"))
    torch.manual_seed(0)
    model = loaded.module.Model(*call_get_init_inputs(loaded)).cuda().eval()
    inputs = [make_inputs(loaded, 1000, "cuda")]
    src = torch.empty(1 << 28, device="cuda")  # 1 GiB of fp32
    dst = torch.empty_like(src)
    timer = CudaEventTimer(60 << 20, warmup_ms=5, rep_ms=20, min_reps=5, max_reps=200, flush_l2=True)
    first = time.time() - start
    with torch.no_grad():
        while time.time() - start < args.seconds:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(5):
                dst.copy_(src)
            end.record()
            end.synchronize()
            copy_s = begin.elapsed_time(end) / 1e3 / 5
            eager = timer.measure(model, inputs)
            row = {"t": round(time.time() - start, 2), "copy_gb_s": round(2 * src.numel() * 4 / copy_s / 1e9, 1),
                   "layernorm_eager_us": round(eager.median_s * 1e6, 2), **smi()}
            rows.append(row)
            print(json.dumps(row), flush=True)
            time.sleep(0.3)
    Path(args.out).write_text(json.dumps({"cuda_ready_s": first, "gpu": torch.cuda.get_device_name(),
                                          "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
