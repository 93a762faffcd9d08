"""The Inductor seed cache's entries: the parts of an entry's key, where it lives, and, when a lookup misses, why.

An entry is ``<cache_dir>/inductor-seeds/<problem>-<key>.json``: what one capture (the default or a variant) wrote,
with the parts of its key beside it (``"key"``), so a later miss can say which part differs from the entry it did not
hit (the problem file, its sizes, the device, the hardware profile, torch and Triton, GEMM templates, TF32, dynamic
shapes, the variant's options), that there is no entry for the problem in that folder at all (another ``HOME`` or
``XDG_CACHE_HOME``, a cleared cache), or that its last capture failed (failures are noted, not cached).
``CapturedSeeds`` carries, with the seeds' sources, how each was got: a run records it (``evo.runs.seeding``), and
its summary and the bench's row say ``seed: cached`` or ``seed: captured (why: ...)``.
"""
from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from kernelevo.core.genome import short_hash
from fitness.common.atomic import write_atomic
from fitness.problems.problem_spec import ProblemSpec
from kernelevo.seeds.inductor.template_choices import template_key

FOLDER = "inductor-seeds"  # under the cache dir
CACHED = "cached"
NO_ENTRY = "no entry"
# the key's parts, in the order the key hashes them, as a miss names them
PARTS = {"problem": "the problem file", "sizes": "sizes", "device": "device", "profile": "hardware profile",
         "versions": "torch/triton versions", "templates": "GEMM templates", "tf32": "tf32", "dynamic": "dynamic",
         "options": "the variant's options"}


def versions() -> str:
    found = []
    for package in ("torch", "triton"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} ?")
    return ", ".join(found)


def key_parts(spec: ProblemSpec, device: str, profile: str, templates: bool = False, tf32: bool = False,
              options: dict | None = None, dynamic: bool = False) -> dict:
    """The parts of an entry's key (the problem file by its hash), as stored beside the entry."""
    return {"problem": short_hash(Path(spec.path).read_text()), "sizes": dict(spec.sizes),
            "device": device.split(":")[0], "profile": profile, "versions": versions(),
            "templates": template_key() if templates else False,  # an entry of other template options misses
            "tf32": tf32, "dynamic": dynamic, "options": options or None}


def cache_key(spec: ProblemSpec, device: str, profile: str, templates: bool = False, tf32: bool = False,
              options: dict | None = None, dynamic: bool = False) -> str:
    """The entry's key: a hash of the problem file's text and the other parts (unchanged since entries were first
    written, so entries made before the parts were stored beside them still hit)."""
    parts = key_parts(spec, device, profile, templates, tf32, options, dynamic)
    hashed = [Path(spec.path).read_text(), spec.sizes, parts["device"], profile, parts["versions"],
              parts["templates"], tf32]
    hashed += ["dynamic"] if dynamic else []
    return short_hash(json.dumps(hashed + [options] if options else hashed, sort_keys=True))


def entry_file(cache_dir: Path, spec: ProblemSpec, key: str) -> Path:
    return Path(cache_dir) / FOLDER / f"{spec.name}-{key}.json"


def why_missed(cache_dir: Path, spec: ProblemSpec, variant: str, wanted: dict) -> str:
    """Why no entry of `spec` in `cache_dir` has the key parts `wanted` for the capture `variant` (``default`` or a
    variant's name): no entry of the problem (or of that variant) there, or the key parts in which the variant's
    nearest entry (fewest parts apart) differs."""
    folder, wanted = Path(cache_dir) / FOLDER, json.loads(json.dumps(wanted))  # as an entry stores them
    entries = sorted(folder.glob(f"{spec.name}-*.json")) if folder.is_dir() else []
    if not entries:
        return f"{NO_ENTRY} for {spec.name} in {folder}"
    apart, unrecorded = [], 0
    for path in entries:
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        parts = entry.get("key") if isinstance(entry, dict) else None
        if not isinstance(parts, dict):
            unrecorded += 1
        elif entry.get("variant", variant) == variant or parts.get("options") == wanted["options"]:
            apart.append([name for name in PARTS if parts.get(name) != wanted.get(name)])
    if not apart:
        older = f"; {unrecorded} older entries of it do not record their key parts" if unrecorded else ""
        return f"{NO_ENTRY} for {spec.name} ({variant}) in {folder}{older}"
    nearest = min(apart, key=len)
    if not nearest:
        return "an entry with these key parts is stored under another key (written by other code)"
    return f"key part {', '.join(PARTS[name] for name in nearest)} differs"


def failed_file(entry: Path) -> Path:
    """Where a capture that failed is noted (``failed/`` beside its entry): not a cache entry, a failure is tried
    again by the next run, but the note lets that run say why it captures again."""
    return entry.parent / "failed" / entry.name


def note_failure(entry: Path, error: str) -> None:
    lines = error.strip().splitlines() or ["(no message)"]
    failed_file(entry).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(failed_file(entry), json.dumps({"error": lines[-1][:300]}))


def failed_before(entry: Path) -> str:
    """Why `entry` is missing when its last capture failed ("" when none is noted)."""
    try:
        error = json.loads(failed_file(entry).read_text())["error"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    return f"its capture failed before ({error}); a failure is not cached, so it is tried again"


class CapturedSeeds(dict):
    """made_by -> source, as ``kernelevo.seeds.inductor.inductor_seeds`` returns them, and `cache`: per capture asked
    for
    (``default`` and each variant) how it was got: ``cached``, or why it was captured (``why_missed``). A dict, so
    every caller of the seeds reads them as before; it pickles with its `cache` (the Ray backend returns it from an
    actor)."""

    def __init__(self, sources: dict | None = None, cache: dict | None = None):
        super().__init__(sources or {})
        self.cache = dict(cache or {})


def cache_note(cache: dict) -> str:
    """One line for a run's captures (``CapturedSeeds.cache``): ``cached`` when every one was read from the cache,
    else ``captured (why: ...)`` naming each one captured (all of them: the default's reason) and how many were
    cached."""
    if not cache:
        return ""
    missed = {name: how for name, how in cache.items() if how != CACHED}
    if not missed:
        return CACHED
    whys = sorted(set(missed.values()))
    if len(whys) == 1 and len(missed) == len(cache):
        return f"captured (why: {whys[0]})"
    cached = len(cache) - len(missed)
    return "captured " + grouped(missed, "why: ") + (f"; {cached} cached" if cached else "")


def grouped(reasons: dict, prefix: str = "") -> str:
    """Names with the same reason said once: ``default, nd_tiling (no entry for ...); cooperative (...)`` (a bench
    of six variants repeated one long reason six times per line)."""
    names = {}
    for name, why in reasons.items():
        names.setdefault(why, []).append(name)
    return "; ".join(f"{', '.join(group)} ({prefix}{why})" for why, group in names.items())
