"""The manifest every figure carries: what it was measured on and with, so a table can be reproduced or disputed.

    gpu, driver, cuda        the device (on the CPU: Triton's interpreter, no driver)
    torch, triton            the versions that ran the kernels and the baselines
    commit                   kernelevo's git commit ("unknown" outside a checkout; marked when it had local changes)
    policy                   the precision policy the kernels were judged by
    seeds                    the search seed(s) and the fitness seed (inputs, parameters)
    baselines                each baseline's status (ok, failed, compile_timeout, not_measured; fitness.baselines)

``build_manifest`` makes a run's (stored with the run, written into summary.json and its report); ``combine`` makes a
table's from its runs' manifests (the bench and multirun pages). ``manifest_rows`` is how every page shows one.
"""
from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("gpu", "driver", "cuda", "torch", "triton", "commit", "policy", "seeds", "baselines")
UNKNOWN = "unknown"
INTERPRETER = "none: Triton's CPU interpreter"


def git_commit(root: Path = REPO_ROOT) -> str:
    """The checkout's commit, marked when tracked files differ from it; "unknown" outside a git checkout."""
    def git(*args) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return commit + (" (with uncommitted changes)" if changed else "")


def driver_version() -> str:
    """The NVIDIA driver's version (NVML, else /proc/driver/nvidia/version), or "unknown"."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - no NVML: try the kernel module's own file
        pass
    try:
        found = re.search(r"Kernel Module\s+([\d.]+)", Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        return UNKNOWN
    return found.group(1) if found else UNKNOWN


def gpu_name(device: str) -> str:
    """The name of the GPU `device` names (cuda, cuda:N), or that there is none (the CPU interpreter)."""
    if not device.startswith("cuda"):
        return INTERPRETER
    try:
        import torch

        return torch.cuda.get_device_name(torch.device(device))
    except Exception:  # noqa: BLE001 - a GPU this process cannot see (a Ray node's)
        return UNKNOWN


def build_manifest(device: str, policy: str, seeds: dict, baselines: dict, gpu: str | None = None) -> dict:
    """The manifest of figures measured on `device` under `policy`, with `seeds` ({"search": [..], "fitness": n})
    and `baselines` (name -> status); `gpu`: its name where this process cannot see it (else looked up)."""
    import torch
    import triton

    on_gpu = device.startswith("cuda")
    return {"gpu": gpu or gpu_name(device), "driver": driver_version() if on_gpu else "none",
            "cuda": torch.version.cuda or "none", "torch": torch.__version__, "triton": triton.__version__,
            "commit": git_commit(), "policy": policy, "seeds": seeds, "baselines": dict(baselines)}


def run_manifest(plan, evaluator) -> dict:
    """A run's manifest, from its plan (``evo.plan.RunPlan``) and its (first) evaluator: on the interpreter no
    baseline is measured; a Ray actor's GPU, which this process cannot see, is named by its hardware profile."""
    from fitness.measure.baselines import NOT_MEASURED
    from fitness.evaluation.evaluator import Evaluator

    names = plan.judge.settings.baselines
    statuses = evaluator.baseline().status if evaluator.on_gpu else dict.fromkeys(names, NOT_MEASURED)
    return build_manifest(evaluator.device, evaluator.policy.name,
                          {"search": [plan.search.seed], "fitness": plan.judge.settings.seed}, statuses,
                          gpu=None if isinstance(evaluator, Evaluator) else evaluator.profile.display_name)


def combine(manifests: list[dict]) -> dict:
    """A table's manifest from its runs' (those that have one): each fact's distinct values joined with "; ", the
    seeds gathered, and per baseline how many runs had each status ({"max_autotune": {"ok": 18, "failed": 2}})."""
    manifests = [m for m in manifests if m]
    if not manifests:
        return {}
    joined = {key: "; ".join(dict.fromkeys(str(m.get(key, UNKNOWN)) for m in manifests))
              for key in FIELDS if key not in ("seeds", "baselines")}
    search = sorted({s for m in manifests for s in (m.get("seeds") or {}).get("search", [])})
    fitness = sorted({(m.get("seeds") or {}).get("fitness") for m in manifests} - {None})
    counts: dict = {}
    for m in manifests:
        for name, status in (m.get("baselines") or {}).items():
            counts.setdefault(name, Counter())[status] += 1
    return {**joined, "seeds": {"search": search, "fitness": fitness[0] if len(fitness) == 1 else fitness},
            "baselines": {name: dict(c) for name, c in counts.items()}, "runs": len(manifests)}


def manifest_line(manifest: dict | None) -> str:
    """The manifest in one line, for a terminal (the pages show every fact: ``manifest_rows``)."""
    if not manifest:
        return "not recorded"
    return (f"{manifest['gpu']}, driver {manifest['driver']}, torch {manifest['torch']}, triton "
            f"{manifest['triton']}, commit {manifest['commit'][:12] + manifest['commit'][40:]}, policy "
            f"{manifest['policy']}")


def manifest_rows(manifest: dict | None) -> list[tuple[str, str]]:
    """(fact, text) rows for a page; one row saying so for a run recorded before manifests existed."""
    if not manifest:
        return [("manifest", "not recorded (made before kernelevo recorded manifests, or no run finished)")]

    def text(value, inner: bool = False) -> str:
        if isinstance(value, dict):
            joined = ", ".join(f"{k} {text(v, True)}" for k, v in value.items()) or "-"
            return f"({joined})" if inner else joined
        if isinstance(value, list):
            return ", ".join(str(v) for v in value) or "-"
        return str(value)

    return [(key, text(manifest[key])) for key in (*FIELDS, "runs") if key in manifest]
