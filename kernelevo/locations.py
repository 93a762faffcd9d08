"""Where a command writes, checked before it starts (``kernelevo.cli``, before Hydra makes its output directory):
one line naming the location and the fix, exit code 2, nothing computed first.

* Hydra's output directory (``hydra.run.dir``, with ``--multirun`` ``hydra.sweep.dir``) must be a folder that can be
  made and written: a read-only one would otherwise fail inside Hydra, as a raw ``OSError``;
* ``out=`` of ``evaluate`` and ``seed`` (relative to that directory) must be a file that can be written: otherwise
  ``evaluate`` loses its verdict, and ``seed`` fails after compiling;
* ``bench.dir``, and the ``run_dir`` that ``resume`` and ``report`` write into, must be writable;
* the run directory of ``kernelevo run`` must not hold a run (``RunStore.saved_run``): a second run there would
  mix its individuals and evaluations into the first's store. The task checks its directory again (``run_taken``),
  for a directory known only once Hydra made it (a job of ``--multirun``, ``${hydra:...}``).

Then the command claims the directory it will write into (``claim``: ``evo.records.claim.Claim``, a lock held for the
command's life), before Hydra writes anything there: the run directory of ``run``, the ``run_dir`` of ``resume``,
the bench directory of ``bench`` (a job of ``--multirun`` claims its own once Hydra made it). Two commands started
together into one directory: the second gets one line naming the first, exit code 2, and writes nothing.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from omegaconf import DictConfig

from kernelevo.core.errors import KernelevoError
from evo.records.claim import Claim


class LocationError(KernelevoError):
    """A command could not write where it is told to; the message names the location and the fix."""


def unwritable(path: Path, folder: bool = True) -> str | None:
    """Why `path` (a folder, made if missing; with folder=False a file) cannot be written, or None when it can."""
    path = Path(path).absolute()
    if path.exists() and path.is_dir() != folder:
        return f"{path} is {'a file, not a folder' if folder else 'a folder, not a file'}"
    existing = path if path.exists() else path.parent
    while not existing.exists():  # the folders a command makes, up to the first that is there
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | (os.X_OK if existing.is_dir() else 0)):
        return f"{existing} is read-only"
    return None


def check_writable(path: Path, name: str, fix: str, folder: bool = True) -> None:
    """Raise LocationError naming the location (`name`), why it cannot be written, and the fix."""
    why = unwritable(path, folder)
    if why is not None:
        raise LocationError(f"cannot write {name}: {why}; {fix}")


def run_taken(run_dir: Path, setting: str = "hydra.run.dir") -> str | None:
    """Why a new run may not start in run_dir (it holds a run: continue that one, or start elsewhere), or None."""
    from evo.records.store import RunStore

    config = RunStore.saved_run(run_dir)
    if config is None:
        return None
    problem = (config.get("problem") or {}).get("name", "?")
    return (f"{run_dir} holds a run already (problem {problem}); continue it with `kernelevo resume "
            f"run_dir={run_dir}`, or start a new run in another directory ({setting}=NEW_DIR)")


def check_locations(command: str, cfg: DictConfig, output_dir: Path | None, multirun: bool) -> None:
    """Where `command` will write, given its composed config and Hydra's output directory (None: not known before
    the job starts). Raises LocationError."""
    setting = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    if command in ("resume", "report"):  # Hydra's directory is run_dir, which holds the run (checked before)
        check_writable(Path(cfg.run_dir), f"into run_dir={cfg.run_dir}", f"`kernelevo {command}` writes there: "
                       f"copy the run directory to a writable place and pass that")
        return
    if command == "bench" and cfg.bench.dir:  # first: Hydra's output directory is this folder (own_folder)
        check_writable(Path(cfg.bench.dir).expanduser(), f"bench.dir={cfg.bench.dir}", "pass bench.dir=A_WRITABLE_DIR")
    if command in ("evaluate", "seed"):
        out = Path(cfg.out)
        if not out.is_absolute() and output_dir is not None:
            out = output_dir / out
        if out.is_absolute():
            name = f"out={cfg.out}" + ("" if out == Path(cfg.out) else f" ({out})")
            check_writable(out, name, "pass out=A_WRITABLE_PATH", folder=False)
    if output_dir is not None:
        check_writable(output_dir, f"the output directory {output_dir}", f"set {setting}=A_WRITABLE_DIR")
    if command == "run" and output_dir is not None and not multirun:
        taken = run_taken(output_dir, setting)
        if taken is not None:
            raise LocationError(taken)


def own_folder(command: str, cfg: DictConfig, output_dir: Path | None) -> Path | None:
    """Hydra's output directory for one job of `command`: a bench's ``bench.dir`` where one is given, the folder of
    a seed's absolute ``out=``; else the one its config names (`output_dir`). Hydra makes its output directory
    whatever the command writes: each bench given a bench.dir, or seed an out=, left a near-empty
    ``outputs/.../.hydra`` folder beside it."""
    if command == "bench" and cfg.bench.dir:
        return Path(cfg.bench.dir).expanduser().absolute()
    if command == "seed" and Path(cfg.out).is_absolute():
        return Path(cfg.out).parent
    return output_dir


CLAIMS: dict[Path, Claim] = {}  # the directories this process holds (a run's task undoes its own: ``held``)


def _pinned(key: str, path: Path) -> str:
    """`key=path` as a Hydra override (quoted where the grammar needs it)."""
    text = str(path)
    return f"{key}={text}" if re.fullmatch(r"[\w./@+-]+", text) else "{}='{}'".format(key, text.replace("'", "\\'"))


def claim(command: str, cfg: DictConfig, output_dir: Path | None, multirun: bool) -> tuple[Claim | None, list[str]]:
    """Claim the directory `command` writes into, before Hydra writes anything: (the claim, or None where the
    command claims nothing here; the overrides that pin Hydra's output directory to the one claimed, whose
    ``${now:...}`` would otherwise be resolved again, a second later). Raises KernelevoError (``DirectoryInUse``, or the
    directory holds a run already) naming the way out."""
    setting = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    pins: list[str] = []
    if command == "run" and output_dir is not None and not multirun:
        folder, pins = output_dir, [_pinned("hydra.run.dir", output_dir)]
        fix = f"wait for it to end, or start this run in another directory ({setting}=NEW_DIR)"
    elif command == "resume":
        folder, fix = Path(cfg.run_dir), "resume it once that process has ended"
    elif command == "bench" and output_dir is not None:  # its bench.dir, where given (own_folder)
        folder, pins = output_dir, [_pinned("hydra.run.dir", output_dir)]
        fix = "wait for it to end, or give this bench another bench.dir"
    else:
        return None, []
    held = Claim(folder, fix, f"kernelevo {command}")
    held.acquire()
    if command == "run":  # it may have finished between the check before and the claim
        taken = run_taken(folder, setting)
        if taken is not None:
            held.release()
            raise LocationError(taken)
    CLAIMS[held.folder] = held
    return held, pins


def release(held: Claim | None) -> None:
    if held is not None:
        CLAIMS.pop(held.folder, None)
        held.release()


def held(folder: Path) -> Claim | None:
    """This process's claim on `folder` (made by ``claim`` before Hydra started), or None."""
    return CLAIMS.get(Path(folder).absolute())
