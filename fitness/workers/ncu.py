"""Profiler feedback from Nsight Compute (``fitness.profile=ncu``): a few metrics per kernel of one forward call.

A correct candidate is run again, on its own, under ``ncu`` in a worker of the sandbox (same confinement, user and
private directory as its evaluation; the GPU held exclusively, since ncu replays each kernel and locks the clocks):
``ncu --profile-from-start off`` starts ``python -m fitness.workers.ncu_target``, which builds the model and its inputs,
calls forward once to compile, then once more between ``cudaProfilerStart`` and ``cudaProfilerStop``, so only that
call's kernels are profiled. ncu's CSV (its details page, one row per kernel and metric, base units) goes to a log
file, parsed here into one record per kernel: time under ncu (clocks locked to base), DRAM and SM throughput as %
of peak, achieved occupancy, registers per thread, shared memory per block, launch shape and the top stall reasons
(cycles per issued instruction); and the count of every launch with their GPU time summed (``total``). Where ncu is
missing, or cannot read the GPU's counters, the record is a note saying so and how to fix it.

The metrics only inform the agents' prompts, never a fitness: the candidate's code runs in the profiled process
and could disturb its own profile, not its judgement. Whatever the run leaves behind (a hung target under a killed
ncu) dies with the worker, PID 1 of its namespace.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                 "not_selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")
METRICS = {  # ncu metric -> field of a kernel's record
    "gpu__time_duration.sum": "time_s",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "launch__shared_mem_per_block_static": "smem_static_bytes",
    "launch__shared_mem_per_block_dynamic": "smem_dynamic_bytes",
    "launch__block_size": "block_size",
    "launch__grid_size": "grid_size",
    **{f"{STALL_PREFIX}{reason}{STALL_SUFFIX}": f"stall:{reason}" for reason in STALL_REASONS},
}
TOP_STALLS = 3
MAX_KERNELS = 8
TIME_UNITS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}
MISSING_NOTE = ("fitness.profile=ncu but Nsight Compute (ncu) was not found on PATH, in $CUDA_HOME/bin or "
                "/usr/local/cuda/bin: no profiler metrics; install Nsight Compute or set fitness.profile=none")
PERMISSION_MARKERS = ("ERR_NVGPUCTRPERM", "does not have permission to access NVIDIA GPU Performance Counters")
PERMISSION_NOTE = ("ncu cannot read the GPU's performance counters as the worker's unprivileged user "
                   "(ERR_NVGPUCTRPERM): allow profiling for all users (NVreg_RestrictProfilingToAdminUsers=0, "
                   "https://developer.nvidia.com/ERR_NVGPUCTRPERM) or set fitness.profile=none")
TARGET_JOB = "ncu_job.json"
NCU_LOG = "ncu.csv"


def find_ncu() -> str | None:
    """The ncu executable: on PATH, in $CUDA_HOME/bin, or in /usr/local/cuda/bin."""
    found = shutil.which("ncu")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        candidate = Path(home or "/nonexistent") / "bin" / "ncu"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def unavailable(on_gpu: bool) -> str:
    """Why no ncu metrics can be had here ("" when they can): no GPU, or no ncu."""
    if not on_gpu:
        return "no profiler metrics on the CPU interpreter (Nsight Compute needs a GPU)"
    return "" if find_ncu() else MISSING_NOTE


def readable_paths(ncu: str) -> list[str]:
    """What a worker must be able to read to start ncu: the executable (through any links) and the folder above
    its bin/ (the CUDA toolkit's bin/ncu starts the Nsight Compute install beside it)."""
    real = Path(ncu).resolve()
    return sorted({os.path.abspath(ncu), str(real), str(real.parent.parent)})


def ncu_command(ncu: str, python: str, job_file: str, log_file: str) -> list[str]:
    return [ncu, "--csv", "--page", "details", "--print-units", "base", "--profile-from-start", "off",
            "--target-processes", "all", "--metrics", ",".join(METRICS), "--log-file", log_file,
            python, "-m", "fitness.workers.ncu_target", job_file]


# parsing -----------------------------------------------------------------------------------------------------
def _number(text: str) -> float | None:
    text = (text or "").strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None  # "n/a", "": the metric does not exist on this GPU


def parse_csv(text: str) -> list[dict]:
    """One record per profiled kernel launch, in launch order, from ncu's details-page CSV (``--csv --page
    details``; lines that are not CSV rows, such as ``==PROF==`` messages, are skipped): {"id", "name",
    "metrics": {metric: (value, unit)}}."""
    rows = [line for line in text.splitlines() if line.startswith('"')]
    launches: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        if not row.get("ID") or not row.get("Metric Name"):
            continue
        launch = launches.setdefault(row["ID"], {"id": row["ID"], "name": row.get("Kernel Name", ""), "metrics": {}})
        launch["metrics"][row["Metric Name"]] = (_number(row.get("Metric Value", "")), row.get("Metric Unit", ""))
    return sorted(launches.values(), key=lambda launch: int(launch["id"]) if launch["id"].isdigit() else 0)


def kernel_record(launch: dict) -> dict:
    """The fields of one launch that the agents are shown (absent metrics left out)."""
    record = {"name": launch["name"]}
    for metric, (value, unit) in launch["metrics"].items():
        field = METRICS.get(metric)
        if field is None or value is None:
            continue
        if field == "time_s":
            value *= TIME_UNITS.get(unit, 1e-9)  # base units: nanoseconds
        if field.startswith("stall:"):
            record.setdefault("stalls", {})[field.split(":", 1)[1]] = value
        else:
            record[field] = value
    if "smem_static_bytes" in record or "smem_dynamic_bytes" in record:
        record["smem_bytes"] = record.pop("smem_static_bytes", 0.0) + record.pop("smem_dynamic_bytes", 0.0)
    stalls = sorted((record.pop("stalls", {})).items(), key=lambda item: -item[1])
    if stalls:
        record["top_stalls"] = [[reason, value] for reason, value in stalls[:TOP_STALLS] if value > 0]
    return record


def merged(text: str) -> list[dict]:
    """The kernels of the profiled forward call, launches of the same kernel merged (times summed, the rest of the
    first launch kept), in the order of their first launch."""
    kernels: dict[str, dict] = {}
    for launch in parse_csv(text):
        record = kernel_record(launch)
        if record["name"] in kernels:
            first = kernels[record["name"]]
            first["launches"] += 1
            first["time_s"] = first.get("time_s", 0.0) + record.get("time_s", 0.0)
        else:
            kernels[record["name"]] = {**record, "launches": 1}
    return list(kernels.values())


def total(kernels: list[dict]) -> dict:
    """Every launch of the forward call, past MAX_KERNELS too: how many, and their GPU time summed (under ncu, clocks
    locked to base). Beside the forward's measured time it says how much of it is the host launching
    (docs/measurements.md)."""
    return {"launches": sum(k["launches"] for k in kernels), "time_s": sum(k.get("time_s", 0.0) for k in kernels)}


# running (inside a sandbox worker) ---------------------------------------------------------------------------
def profile_in_worker(job) -> dict:
    """Run the job's candidate once under ncu from this (confined) worker; the record stored with its evaluation:
    {"tool": "ncu", "kernels": [...], "wall_s": ...} or {"tool": "ncu", "note": why there are none}."""
    start = time.perf_counter()
    Path(TARGET_JOB).write_text(json.dumps({"problem": job.problem, "source": job.source, "seed": job.settings.seed,
                                            "device": job.device}))
    command = ncu_command(job.ncu, sys.executable, TARGET_JOB, NCU_LOG)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=job.ncu_timeout_s)
        output = done.stdout + done.stderr
        log = Path(NCU_LOG).read_text() if Path(NCU_LOG).is_file() else ""
    except subprocess.TimeoutExpired:
        return {"tool": "ncu", "note": f"ncu did not finish within {job.ncu_timeout_s:g} s",
                "wall_s": time.perf_counter() - start}
    except OSError as exc:
        return {"tool": "ncu", "note": f"ncu could not be started: {exc}", "wall_s": time.perf_counter() - start}
    wall_s = time.perf_counter() - start
    if any(marker in output + log for marker in PERMISSION_MARKERS):
        return {"tool": "ncu", "note": PERMISSION_NOTE, "wall_s": wall_s}
    kernels = merged(log)
    if not kernels:
        tail = (output + log).strip()[-600:]
        return {"tool": "ncu", "note": f"ncu profiled no kernel (exit code {done.returncode}): {tail}",
                "wall_s": wall_s}
    return {"tool": "ncu", "kernels": kernels[:MAX_KERNELS], "total": total(kernels), "wall_s": wall_s}
