"""Does the run's best kernel run at other sizes: what the check's records say (the check itself:
``evo.runs.other_sizes``, which judges; this module only reads its records from the run store's meta and says them).

* **Off a GPU** (``SIZES_CHECK``, read back by ``check_verdict``): the kernels tried at other sizes, the one kept
  (correct there too) and the one chosen (kept, else the fastest that refuses them cleanly). Where none was kept the
  best is flagged: summary status ``BAKED``, a header in ``best_kernel.py`` (``flagged``), a line of the table saying no
  kernel that runs at other sizes was found (``rows``); where every kernel tried was defective there, the fastest
  stays, flagged ``DEFECTIVE_STATUS``.
* **On a GPU** (``SIZES_LABEL``, read back by ``label_verdict``): the kernels tried and the one chosen, read by
  ``evo.reports.outcome.summarise`` into summary.json as ``runs_at_other_sizes`` (true, false, or null: not checked),
  ``other_sizes_note`` (the line: ``label``) and ``other_sizes_verdicts``, shown by the console table, the report and
  the bench table (``label_rows``), and in ``best_kernel.py``'s header when it runs only at the problem's sizes
  (``label_flagged``).
"""
from __future__ import annotations

from evo.records.meta import SIZES_CHECK, SIZES_LABEL
from evo.records.store import RunStore

BAKED = "baked-at-test-sizes"  # summary.json's status when no kernel tried runs at other sizes
BAKED_HEADER = "# kernelevo: BAKED AT THE TEST SIZES {sizes}: {why}\n"
# a kernel's verdict at each other size, and over them all (the worst: defective, then refuses-cleanly)
RUNS, REFUSES, DEFECTIVE = "runs-correct", "refuses-cleanly", "defective"
DEFECTIVE_STATUS = "defective-at-other-sizes"  # summary.json's status when every kernel tried was defective there
DEFECTIVE_HEADER = "# kernelevo: DEFECTIVE AT OTHER SIZES: {why}\n"
LABEL = "runs at other sizes"  # the row's label in the tables
NOT_CHECKED = "not checked"
ONLY_HERE_HEADER = "# kernelevo: RUNS ONLY AT THE PROBLEM'S SIZES: {why}\n"


def sizes_text(sizes: dict) -> str:
    """Size constants as a line says them: ``N=4096, M=512``."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def sets_text(record: dict) -> str:
    """The other sizes judged at, as a line says them: ``N=12; N=11``."""
    return "; ".join(sizes_text(changed) for changed in record.get("size_sets") or [record["other_sizes"]])


def verdict_of(tried: dict) -> str:
    """A tried kernel's verdict in words: ``defective (incorrect: ...)``, ``refuses-cleanly (ValueError: ...)``."""
    what, reason = tried.get("verdict") or tried["status"], tried["reason"]  # an older record: its status
    if what == DEFECTIVE:
        reason = f"{tried['status']}: {reason}" if reason else tried["status"]
    return what + (f" ({reason})" if reason else "")


def check_verdict(store: RunStore, fastest: str | None) -> dict | None:
    """The stored verdict when it judged the run whose fastest kernel is `fastest` (None: none, or an older one)."""
    record = store.get_meta(SIZES_CHECK)
    return record if record is not None and record.get("fastest") == fastest else None


def chosen(record: dict | None) -> str | None:
    """The run's best by the check: the kernel kept (correct at the other sizes), else the fastest that refuses them
    cleanly (None: neither; an older record: its kept)."""
    return (record or {}).get("chosen", (record or {}).get("kept"))


def defective(record: dict | None) -> bool:
    """Whether every kernel tried at other sizes was defective there (or without a verdict, one at least defective):
    the fastest stays the best, flagged, with no kernel of the run fit to be called at other sizes."""
    return bool(record and record["tried"] and chosen(record) is None
                and any(t.get("verdict") == DEFECTIVE for t in record["tried"]))


def baked(record: dict | None) -> bool:
    """Whether the run's best is baked at the test sizes: kernels were tried at other sizes, none ran there, and the
    best refuses them cleanly (or, from an older record, failed there)."""
    return bool(record and record["tried"] and record["kept"] is None and not defective(record))


def _failures(record: dict) -> str:
    """Which kernels failed at the other sizes and why, those failing alike together:
    `1.1, 0.1 defective (incorrect: ...)`."""
    why: dict[str, list] = {}
    for t in record["tried"]:
        if t["status"] != "ok":
            why.setdefault(verdict_of(t), []).append(t["id"])
    return "; ".join(f"{', '.join(ids)} {reason}" for reason, ids in why.items())


def verdict_text(record: dict) -> str:
    """One line: what was tried at the other sizes and what came of it."""
    if not record["test_sizes"]:
        return f"runs at the full sizes: yes, judged at them ({record['why_not']})"
    if not record["other_sizes"]:
        return f"runs at other sizes: not checked ({record['why_not']})"
    tried, at = record["tried"], sets_text(record)
    if not tried:
        return f"runs at other sizes: not checked (no correct kernel to judge at {at})"
    failed = _failures(record)
    if record["kept"] is not None:
        return (f"runs at other sizes: {record['kept']} is correct at {at}, kept as the best ({len(tried)} tried"
                + (f"; failed: {failed}" if failed else "") + ")")
    if defective(record):
        return (f"runs at other sizes: no kernel that runs at other sizes or refuses them cleanly was found "
                f"({len(tried)} tried at {at}; failed: {failed}); the best at the test sizes, {record['fastest']}, "
                f"is {DEFECTIVE} at other sizes: it must not be called at any but the test sizes "
                f"({sizes_text(record['test_sizes'])})")
    best = chosen(record) or record["fastest"]
    return (f"runs at other sizes: no kernel that runs at other sizes was found ({len(tried)} tried at {at}; failed: "
            f"{failed}); the best at the test sizes that is not defective there, {best}, is baked at the "
            f"test sizes ({sizes_text(record['test_sizes'])}) and cannot run at the full sizes")


def rows(record: dict | None) -> list[tuple[str, str]]:
    """The table's and the report's lines on selection and sizes (none for a run without a verdict: on a GPU)."""
    if record is None:
        return []
    label, _, text = verdict_text(record).partition(": ")
    lines = [("judged at", f"the test sizes {sizes_text(record['test_sizes'])}" if record["test_sizes"] else
              "the full sizes (the test sizes)")]
    if record["baked_seeds"]:
        lines.append(("compiler seeds", f"{', '.join(record['baked_seeds'])}: captured at the test sizes; they and "
                                        f"their offline descendants are baked there"))
    if record.get("generic_seeds"):
        lines.append(("compiler seeds", f"{', '.join(record['generic_seeds'])}: captured with dynamic shapes; they "
                                        f"read their sizes from their inputs"))
    return lines + [(label, text)]


def flagged(source: str, record: dict | None) -> str:
    """The best kernel's file: its source, under a header saying so when it is baked at the test sizes or defective
    at other sizes."""
    if defective(record):
        return DEFECTIVE_HEADER.format(why=f"every kernel tried failed at other sizes ({_failures(record)[:300]}); "
                                           f"it runs correctly at the test sizes only") + source
    if not baked(record):
        return source
    return BAKED_HEADER.format(sizes=sizes_text(record["test_sizes"]),
                               why=f"it failed at other sizes ({_failures(record)[:300]}); it does not run at the "
                                   f"problem's full sizes") + source


def label_verdict(store: RunStore, best: str | None) -> dict | None:
    """The stored verdict when it judged `best` (None: none, or one of another kernel)."""
    record = store.get_meta(SIZES_LABEL)
    return record if record is not None and best is not None and record.get("best") == best else None


def label_defective(record: dict | None) -> bool:
    """Whether every kernel tried at the other sizes was defective there (the fastest stays the best, flagged)."""
    return bool(record and record.get("tried") and record["runs"] is False and record.get("chosen") is None)


def label(record: dict | None) -> tuple[bool | None, str]:
    """Whether the best kernel runs at other sizes (None: not checked) and the line that says so: the best's verdict
    and, where faster kernels were defective there and passed over, theirs."""
    if record is None:
        return None, ""
    if record["runs"] is None:
        return None, f"{NOT_CHECKED} ({record['why_not']})"
    at = sets_text(record)
    tried = record.get("tried", [])
    over = [f"{t['id']} {verdict_of(t)}" for t in tried if t["id"] != record.get("chosen")]
    if label_defective(record):
        return False, (f"no, {DEFECTIVE} at {at}: every kernel tried failed there ({'; '.join(over)[:600]}); the "
                       f"fastest is kept but must not be called at other sizes")
    over = f" ({record['chosen']} is the best: faster kernels defective there: {'; '.join(over)[:400]})" \
        if over else ""
    if record["runs"]:
        return True, f"yes, correct at {at} too" + over
    sizes = next((t["sizes"] for t in tried if t["id"] == record.get("chosen")), [])
    ran = "; ".join(size["at"] for size in sizes if size["verdict"] == RUNS)
    how = (f"refuses {'; '.join(size['at'] for size in sizes if size['verdict'] == REFUSES)} cleanly "
           f"({record['reason']})" + (f", correct at {ran}" if ran else "")) if sizes else \
        f"failed at {at}: {record['status']}" + (f" ({record['reason']})" if record["reason"] else "")  # older
    return False, f"no, specialised to the problem's sizes ({sizes_text(record['problem_sizes'])}); {how}{over}"


def label_rows(runs: bool | None, note: str, interpreter: bool) -> list[tuple[str, str]]:
    """The console table's and the report's line (none on the interpreter: ``rows``)."""
    return [] if interpreter else [(LABEL, note or NOT_CHECKED)]


def label_flagged(source: str, runs: bool | None, note: str, defective_there: bool = False) -> str:
    """The best kernel's file: its source, under a header saying so when it runs only at the problem's sizes, or
    is defective at other sizes (`defective_there`)."""
    if defective_there:
        return DEFECTIVE_HEADER.format(why=note[:400]) + source
    return source if runs is not False else ONLY_HERE_HEADER.format(why=note[:400]) + source
