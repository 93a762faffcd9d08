"""Baselines measured once per machine: eager, torch.compile and max-autotune of one problem are timed once per
problem file, sizes, GPU model, precision policy, timing settings and torch/Triton versions, and every later run on
the machine -- a bench's other seeds and resumes, the next bench, a `kernelevo run` -- reads them back.

Stored under the kernelevo cache dir (``fitness.evaluation.evaluator.default_cache_dir``) as
``baselines/<name>-<key>.json``, each file written whole (``fitness.common.atomic.write_atomic``); a key is the hash of
everything the times depend on, so a changed problem file, size, GPU, policy, setting or version is a new key (measured
again), never a stale time. Processes measuring the same key at once take turns on a lock file beside it
(``filelock.FileLock``): the first measures, the others read what it wrote. Only a measurement in which every baseline
was measured (or is not measured on this device) is kept: a failed or too-slow compile may be the machine's state that
day, so it is measured again next time. A file written before the baselines' library kernels were recorded (no
``library``), or before graph breaks were (another ``LIBRARY_RECORD`` in its key), is measured again once.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Callable

from filelock import FileLock

from kernelevo.core.genome import short_hash
from fitness.common.atomic import write_atomic
from fitness.measure.baselines import BASELINES, LIBRARY_RECORD, NOT_MEASURED, OK, Baseline
from fitness.measure.timing import TimingStats

FOLDER = "baselines"


def versions() -> dict:
    """The torch and Triton versions installed (what compiles and times the baselines)."""
    found = {}
    for package in ("torch", "triton"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "?"
    return found


def gpu_model(device: str) -> str:
    """The GPU's name as CUDA gives it ("NVIDIA H100 80GB HBM3"), or "cpu"."""
    if not device.startswith("cuda"):
        return "cpu"
    import torch

    return torch.cuda.get_device_name(torch.device(device))


def facts(evaluator, policy=None, names: list[str] | None = None) -> dict:
    """Everything an evaluator's baselines depend on: the problem's text (not its path: a Ray actor writes it
    elsewhere) and sizes in effect, the GPU model and hardware profile, the policy, the baselines asked for and the
    settings that time them, the versions. `policy`, `names`: those of the measurement where not the evaluator's
    (its compiled baselines re-timed with IEEE fp32 dot products: ``Evaluator.baseline_ieee``)."""
    settings = evaluator.settings
    return {"problem": evaluator.problem.name, "text": short_hash(Path(evaluator.problem.path).read_text()),
            "sizes": evaluator.sizes_used, "gpu": gpu_model(evaluator.device), "profile": evaluator.profile.name,
            "policy": (policy or evaluator.policy).to_dict(),
            "baselines": list(evaluator.baseline_names if names is None else names),
            "timing": asdict(settings.timing), "seed": settings.seed,
            "compile_timeout_s": settings.baseline_compile_timeout_s, "versions": versions(),
            "library": LIBRARY_RECORD}  # how a baseline's library calls were read: files of before are measured again


def path_for(cache_dir: Path, found: dict) -> Path:
    name = found["problem"].replace("/", "_")
    return Path(cache_dir) / FOLDER / f"{name}-{short_hash(json.dumps(found, sort_keys=True, default=str))}.json"


def to_json(baseline: Baseline, found: dict, wall_s: float) -> str:
    return json.dumps({"facts": found, "measured_at": time.time(), "wall_s": wall_s, "notes": baseline.notes,
                       "status": baseline.status, "library": baseline.library,
                       **{name: s.to_dict() if (s := baseline.stats(name)) else None for name in BASELINES}},
                      indent=1, default=str)


def from_json(text: str, path: Path) -> Baseline:
    data = json.loads(text)
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(data["measured_at"]))
    stats = {name: TimingStats.from_dict(data.get(name)) for name in BASELINES}
    return Baseline(stats["eager"], stats["compile"], list(data["notes"]), stats["max_autotune"],
                    dict(data["status"]), cached=f"{path} (measured {stamp} in {data['wall_s']:.1f} s)",
                    library=dict(data["library"]))  # a file of before it was recorded: measured again


def keepable(baseline: Baseline) -> bool:
    """Whether a measurement is worth keeping: every baseline measured (or not measured on this device)."""
    return bool(baseline.status) and all(state in (OK, NOT_MEASURED) for state in baseline.status.values())


def cached_or_measured(cache_dir: Path, found: dict, measure: Callable[[], Baseline]) -> Baseline:
    """The baselines of `found` (``facts``) from the cache, else `measure()`d now and kept (when ``keepable``).
    A cache file that cannot be read is measured again and replaced."""
    path = path_for(cache_dir, found)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_suffix(".lock")):  # whoever else measures the same key waits for this one
        try:
            return from_json(path.read_text(), path)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # none yet, or unreadable: measured now
        start = time.perf_counter()
        baseline = measure()
        if keepable(baseline):
            write_atomic(path, to_json(baseline, found, time.perf_counter() - start))
        return baseline
