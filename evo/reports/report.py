"""A run's report, from its store alone: written at the end of every run and by `kernelevo report run_dir=DIR`.

`collect` gathers the report's data once (``RunReport``); it is written as ``report.html`` (self-contained: inline
CSS and plot, `evo/reports/report_html.py`), ``report.md`` and ``fitness.png``. It holds the summary table (the figures
of ``summary.json``; on Triton's CPU interpreter no speed-ups, only correct / not and interpreter wall-clock times),
best and median time per generation, the lineage of the best kernel back to the seed (operator and speed-up on each
edge), the best kernel's diff against the seed as written, per-operator success rates, LLM calls and cost per role,
the precision policy with its tolerances and the statuses of every evaluation.
and, for LLM runs, the sizes of the agents' prompts per role and what profiler feedback cost.
"""
from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kernelevo.core.errors import KernelevoError
from evo.reports import sizes_record
from evo.reports.anytime import curve_header, curve_rows, plot as plot_anytime
from evo.reports.page import figure_png, pyplot
from evo.records.manifest import manifest_rows
from evo.reports.console import ROOFLINE_LABEL, evaluations_text, rank_text, seed_rows, time_text
from evo.reports.outcome import RunOutcome, summarise
from evo.records.meta import REWRITTEN_SEED, STOP_REASON
from evo.records.store import RunStore
from fitness.measure.baselines import BASELINES, LABELS, speedup_rows, speedup_text
from kernelevo.core.genome import evaluation_key
from kernelevo.core.individual import Individual
from fitness.common.formatting import DASH, NA, percent, ratio, seconds, speedup
from kernelevo.core.evaluation_record import EvalResult, labels_text

HTML_FILE = "report.html"
REPORT_FILE = "report.md"
PLOT_FILE = "fitness.png"


@dataclass
class Node:
    """One kernel of the best kernel's lineage; `parents` are the kernels it was made from (the seed has none)."""
    label: str  # id, operator, generation, time, parameters
    edge: str = ""  # how this kernel was made into the one above it: operator and speed-up ("" for the best)
    parents: list = field(default_factory=list)
    repeated: bool = False  # drawn above already (an ancestor shared through a crossover): not expanded again


@dataclass
class RunReport:
    title: str
    run_dir: Path
    interpreter: bool  # times are Triton's CPU interpreter wall-clock: no speed-ups anywhere
    summary: list  # (figure, value)
    generations: list  # rows of GENERATION_HEADER
    lineage: Node | None
    diff: list  # unified diff lines, seed as written -> best kernel
    operators: list  # rows of OPERATOR_HEADER
    llm: list  # rows of LLM_HEADER
    policy: list  # rows of POLICY_HEADER
    policy_facts: list  # (setting, value)
    statuses: list  # rows of STATUS_HEADER: each status, its count, its failures' reasons (status_rows)
    plot_png: bytes = b""
    llm_children: list = field(default_factory=list)  # rows of LLM_CHILD_HEADER
    prompt_sizes: dict = field(default_factory=dict)  # RunStore.prompt_sizes: per LLM role
    profiles: dict = field(default_factory=dict)  # RunStore.profiles: profiler feedback per kernel
    # (fact, value): what the figures were measured on (evo.records.manifest)
    manifest: list = field(default_factory=list)
    # best speed-up so far against GPU-seconds and LLM cost (evo.reports.anytime)
    anytime: dict = field(default_factory=dict)
    anytime_png: bytes = b""  # that curve drawn (none without a speed-up: the interpreter)
    anytime_none: str = ""  # why there is no curve (no_speedup)


def no_speedup(correct: bool, interpreter: bool) -> str:
    """Why a run's report has no speed-up curve, the one reason that holds."""
    if not correct:
        return "No speed-up: the run found no correct kernel (why: the failures under Evaluations)."
    if interpreter:
        return ("No speed-up: the kernel is correct, but its times are Triton's CPU interpreter's wall-clock and no "
                "baseline is measured there (speed-ups need a GPU).")
    return "No speed-up: the kernel is correct, but no baseline was measured to compare it with."

STATUS_HEADER = ("status", "evaluations", "reasons (first line, how many)")
NUMBER = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")  # what reasons of one kind differ by (status_rows)
GENERATION_HEADER = ("generation", "offspring", "evaluations so far", "best", "median", "correct in population")
OPERATOR_HEADER = ("operator", "children", "correct", "improved on parent", "correct %", "improved %", "LLM calls",
                   "LLM cost")
LLM_HEADER = ("role", "model", "requests", "cache replays", "prompt tokens", "completion tokens", "cost")
LLM_ROLES = ("initialiser", "planner", "coder", "debugger", "crossover")
LLM_CHILD_HEADER = ("child", *LLM_ROLES, "calls", "kernel")


def llm_child_rows(calls: list, individuals: list) -> list:
    """Per child (the requests of no child under "-"): its LLM calls per role (replays included) and what became of
    it: its kernel's status, or "no kernel" when it made none."""
    status = {ind.id: ind.status for ind in individuals}
    per: dict = {}
    for call in calls:
        per.setdefault(call["individual"] or "-", Counter())[call["role"]] += 1
    return [[child, *[roles.get(role, 0) for role in LLM_ROLES], sum(roles.values()),
             status.get(child, "" if child == "-" else "no kernel")] for child, roles in per.items()]
POLICY_HEADER = ("dtype", "atol", "rtol", "max relative L2 error")


def _t(value) -> str:
    return seconds(value, DASH)


def _time(result: EvalResult | None) -> str:
    return seconds(result.time_s) if result is not None and result.ok else NA


def summary_rows(o: RunOutcome) -> list[tuple[str, str]]:
    """The summary table: the figures of the run's outcome (summary.json), each with its label."""
    if not o.timer:
        return [("best kernel", "none: no individual was evaluated")]
    rows = [("problem", f"{o.problem} {o.sizes or ''}".strip()),
            ("device / hardware profile / timer", f"{o.device} / {o.hardware_profile} / {o.timer}")]
    if not o.ok:
        rows.append(("best kernel", f"no correct kernel ({o.status}: {o.reason[:300]})"))
    elif o.interpreter:
        baked = "; at the test sizes only: baked there" if sizes_record.baked(o.sizes_check) else ""
        rows += [("best kernel", "correct (Triton's CPU interpreter: wall-clock times below are the interpreter's, "
                                 f"not kernel speed; no speed-ups){baked}"),
                 ("best kernel, interpreter wall-clock", seconds(o.best_s)),
                 *seed_rows(o, "interpreter wall-clock, "), *sizes_record.rows(o.sizes_check)]
    else:
        rows += [("best kernel time", seconds(o.best_s)), *seed_rows(o),
                 ("speed-up vs seed (as written)", speedup(o.seed_speedup, NA)),
                 *baseline_time_rows(o), *speedup_rows(vars(o)),
                 ("fraction of the data floor", percent(o.floor_fraction, 1, NA)),
                 (ROOFLINE_LABEL, percent(o.sol_fraction, 1, NA)),
                 *sizes_record.label_rows(o.runs_at_other_sizes, o.other_sizes_note, o.interpreter)]
    rows += [*([("labels", labels_text(o.labels))] if o.labels else []),
             ("ranked by", o.ranked_by or "?"),
             ("precision policy", o.policy or "?"),
             ("seed from", (f"{o.seed}, rewritten by the {o.seed_rewritten_by}" if o.seed_rewritten_by
                            else o.seed) or "?"),
             ("best kernel descends from", o.best_from or "?"),
             ("evaluations", evaluations_text(o)),
             ("LLM calls / cost", f"{o.llm_calls} / ${o.llm_cost_usd:.4f}"),
             ("time", time_text(o)), ("tuning", o.tuner or "?"),
             ("stopped because", o.stop_reason or "-"),
             ("best kernel file", o.best_file)]
    return rows


def baseline_time_rows(o: RunOutcome) -> list[tuple[str, str]]:
    """Each baseline's time, or why there is none (not measured, failed, too slow to compile)."""
    return [(f"{LABELS[name]} time", _t(o.baseline_s(name)) if o.baseline_s(name) is not None
             else speedup_text(None, o.baseline_status.get(name))) for name in BASELINES]


def _edge(child: Individual, parent: Individual, interpreter: bool) -> str:
    """The edge parent -> child: the operator that made the child, and how its time compares with the parent's."""
    if not (child.ok and parent.ok):
        change = f"{parent.status} -> {child.status}"
    elif interpreter:
        change = f"interpreter wall-clock {seconds(parent.time_s)} -> {seconds(child.time_s)}"
    else:
        change = ratio(parent.time_s, child.time_s)
    return f"{child.operator}, {change}"


def node_label(ind: Individual, as_written: dict, interpreter: bool, rewritten_seed: str = "") -> str:
    """A kernel of the lineage; a root (generation 0) with its own time as written (`as_written`: id -> result),
    and the starting kernel 0.0, when the initialiser rewrote the seed, with the seed's (made by `rewritten_seed`)."""
    clock = " (interpreter wall-clock)" if interpreter and ind.ok else ""
    label = f"{ind.id} {ind.operator}, generation {ind.generation}: {_t(ind.time_s) if ind.ok else ind.status}{clock}"
    if ind.result is not None and ind.result.labels:
        label += f" [{', '.join(ind.result.labels)}]"
    if not ind.parents and ind.id == "0.0" and rewritten_seed:
        label += (f"; the {ind.operator}'s rewrite of the seed ({rewritten_seed}, as written "
                  f"{_time(as_written.get('seed'))}), tuned here")
    elif not ind.parents:
        label += f"; as written {_time(as_written.get(ind.id))}, tuned here"
    return label + (f"; params {ind.genome.params}" if ind.genome.params else "")


def lineage_tree(best: Individual, by_id: dict, as_written: dict, interpreter: bool, rewritten_seed: str = "") -> Node:
    """The best kernel and, below it, what it was made from, down to the seed (each ancestor expanded once)."""
    drawn = set()

    def node(ind: Individual, edge: str) -> Node:
        current = Node(node_label(ind, as_written, interpreter, rewritten_seed), edge, repeated=ind.id in drawn)
        if not current.repeated:
            drawn.add(ind.id)
            current.parents = [node(by_id[p], _edge(ind, by_id[p], interpreter)) for p in ind.parents if p in by_id]
        return current

    return node(best, "")


def operator_rows(individuals: list[Individual]) -> list[list]:
    """Per operator: children made, correct, and improved (correct and faster than the fastest of its parents)."""
    by_id = {ind.id: ind for ind in individuals}
    counts: dict[str, Counter] = {}
    for ind in individuals:
        if not ind.parents:
            continue
        count = counts.setdefault(ind.operator, Counter())
        best_parent = min((by_id[p].time_s for p in ind.parents if p in by_id), default=math.inf)
        count.update(children=1, correct=int(ind.ok), improved=int(ind.ok and ind.time_s < best_parent),
                     calls=ind.llm.get("calls", 0))
        count["cost"] += ind.llm.get("cost_usd", 0.0)
    return [[op, c["children"], c["correct"], c["improved"], f"{c['correct'] / c['children']:.0%}",
             f"{c['improved'] / c['children']:.0%}", c["calls"], f"${c['cost']:.4f}"]
            for op, c in sorted(counts.items(), key=lambda item: -item[1]["children"])]


def policy_rows(policy: dict) -> tuple[list, list]:
    tolerances = [[dtype, t.get("atol"), t.get("rtol"), t.get("max_rel_l2", "-")]
                  for dtype, t in (policy.get("tolerances") or {}).items()]
    facts = [(key, str(policy[key])) for key in ("name", "description", "tf32", "torch_compute", "extra_allowed_ops",
                                                 "fp32_operands") if key in policy]
    return tolerances, facts


def plot_fitness(logbook: list[dict], individuals: list[Individual], interpreter: bool) -> bytes:
    """Best and median rank per generation over every correct kernel's (dots): GPU time, or on the interpreter the
    proxy's launches (``kernelevo.core.individual.ranked_by``); PNG bytes."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    correct = [ind for ind in individuals if ind.ok]
    scale = 1.0 if interpreter else 1e3
    ax.plot([ind.generation for ind in correct], [ind.rank * scale for ind in correct], ".", color="0.7",
            label="each correct kernel")
    gens = [row["gen"] for row in logbook]
    for key, style in (("best", "o-"), ("median", "s--")):
        ax.plot(gens, [row[key] * scale if math.isfinite(row[key]) else float("nan") for row in logbook], style,
                label=f"{key} of population")
    ax.set_xlabel("generation")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("Triton launches (the interpreter's proxy)" if interpreter else "kernel time (ms)")
    ax.set_title("rank per generation (lower is better)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return figure_png(fig)


def collect(store: RunStore) -> RunReport:
    """Everything the report shows, read through the store's typed API."""
    state = store.latest_checkpoint()
    if state is None:
        raise KernelevoError(f"{store.run_dir}: the run has no finished generation yet; nothing to report")
    summary = summarise(store, state, store.get_meta(STOP_REASON, ""))
    individuals = store.individuals()
    by_id = {ind.id: ind for ind in individuals}
    best, seed = store.individual(summary.best_id) if summary.best_id else None, by_id.get("0.0")
    first = best.result if best is not None else (seed.result if seed is not None else None)
    interpreter = summary.interpreter
    generations = [[r["gen"], r["nevals"], r["evaluations"], rank_text(r["best"], interpreter),
                    rank_text(r["median"], interpreter), r["correct"]] for r in state.logbook]
    diff = []
    if best is not None and seed is not None:
        diff = list(difflib.unified_diff(seed.genome.source.splitlines(), best.genome.rendered().splitlines(),
                                         "starting kernel 0.0 (the initialiser's rewrite of the seed)" if
                                         summary.seed_rewritten_by else "seed (as written)", f"best kernel ({best.id})",
                                         lineterm=""))
    tolerances, facts = policy_rows(first.policy if first is not None else {})
    llm = [[u["role"] or "-", u["model"] or "-", u["calls"], u["cached"], u["prompt_tokens"],
            u["completion_tokens"], f"${u['cost_usd']:.4f}"] for u in store.llm_usage()]
    problem = first.problem if first is not None else "?"
    as_written = {ind.id: store.evaluation(evaluation_key(ind.genome.source)) for ind in individuals
                  if not ind.parents}  # each root's own time as written; the rewritten seed's under "seed"
    as_written["seed"] = store.evaluation(store.get_meta(REWRITTEN_SEED)["key"]) if summary.seed_rewritten_by \
        else None
    lineage = (lineage_tree(best, by_id, as_written, interpreter, summary.seed if summary.seed_rewritten_by else "")
               if best is not None else None)
    return RunReport(title=f"kernelevo run: {problem} ({store.run_dir.name})", run_dir=store.run_dir,
                     interpreter=interpreter, summary=summary_rows(summary), generations=generations,
                     lineage=lineage, diff=diff,
                     operators=operator_rows(individuals), llm=llm, policy=tolerances, policy_facts=facts,
                     statuses=status_rows(store.evaluations().values()),
                     plot_png=plot_fitness(state.logbook, individuals, interpreter),
                     llm_children=llm_child_rows(store.llm_calls(), individuals),
                     prompt_sizes=store.prompt_sizes(), profiles=store.profiles(),
                     manifest=manifest_rows(summary.manifest), anytime=summary.anytime,
                     anytime_png=plot_anytime([("", summary.anytime)], "best speed-up so far")
                     if summary.anytime["points"] else b"", anytime_none=no_speedup(summary.ok, interpreter))


def status_rows(results, reasons: int = 3) -> list[tuple[str, int, str]]:
    """Rows of STATUS_HEADER, the most common status first, each failure's `reasons` most common first lines beside
    (``reason_heads``), so a page says why, not only how often."""
    results = list(results)
    return [(status, count, reason_heads([r.reason for r in results if r.status == status and not r.ok], reasons))
            for status, count in Counter(r.status for r in results).most_common()]


def reason_heads(reasons: list[str], shown: int = 3) -> str:
    """The `shown` most common first lines of `reasons` with how many gave each (lines that differ only in their
    numbers, an input seed or a value, count as one, shown by their first; each cut at 200 characters), and how many
    other first lines there are; "" for none."""
    lines = [reason.strip().splitlines()[0] for reason in reasons if reason.strip()]
    kinds = Counter(NUMBER.sub("N", line) for line in lines)
    first: dict[str, str] = {}
    for line in lines:
        first.setdefault(NUMBER.sub("N", line), line)
    heads = [f"{_cut(first[kind])} ({n})" for kind, n in kinds.most_common(shown)]
    more = len(kinds) - len(heads)
    return "; ".join(heads) + (f"; and {more} other reason(s)" if more > 0 else "")


def _cut(line: str, chars: int = 200) -> str:
    return line if len(line) <= chars else line[:chars - 3] + "..."


def _md_table(header, rows) -> list[str]:
    clean = lambda cell: str(cell).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(clean(c) for c in row) + " |" for row in rows], ""]


def _md_tree(node: Node, depth: int = 0) -> list[str]:
    edge = f"*{node.edge}* from " if node.edge else ""
    line = f"{'  ' * depth}- {edge}`{node.label}`" + (" (shown above)" if node.repeated else "")
    return [line] + [line for parent in node.parents for line in _md_tree(parent, depth + 1)]


def markdown(report: RunReport) -> str:
    lines = [f"# {report.title}", "", f"The same report with its plot inline: [{HTML_FILE}]({HTML_FILE})", "",
             "## Summary", "", *_md_table(("figure", "value"), report.summary),
             "## Manifest", "", *_md_table(("fact", "value"), report.manifest),
             "## Rank per generation (GPU time; on the interpreter, Triton launches)", "",
             f"![best and median rank per generation]({PLOT_FILE})", "",
             *_md_table(GENERATION_HEADER, report.generations), "## Best speed-up so far", "",
             *(_md_table(curve_header(report.anytime), curve_rows(report.anytime)) if report.anytime_png
               else [report.anytime_none, ""])]
    if report.lineage is not None:
        lines += ["## Lineage of the best kernel (down to the seed; operator and change on each edge)", "",
                  *_md_tree(report.lineage), ""]
    lines += ["## Operators", "", *_md_table(OPERATOR_HEADER, report.operators)]
    if report.llm:
        lines += ["## LLM calls and cost", "", *_md_table(LLM_HEADER, report.llm),
                  "LLM calls per child and role:", "", *_md_table(LLM_CHILD_HEADER, report.llm_children)]
    lines += prompt_size_lines(report.prompt_sizes) + profiler_lines(report.profiles) + [""]
    lines += ["## Precision policy", "", *[f"- {k}: {v}" for k, v in report.policy_facts], "",
              *_md_table(POLICY_HEADER, report.policy),
              "## Evaluations", "", *_md_table(STATUS_HEADER, report.statuses)]
    lines += ["## Best kernel against the seed", "", "```diff", *(report.diff or ["(no change)"]), "```", ""]
    return "\n".join(lines)


def prompt_size_lines(sizes: dict) -> list[str]:
    """The LLM prompts' sizes per role (``RunStore.prompt_sizes``), with their three largest parts."""
    if not sizes:
        return []
    lines = ["", "## LLM prompt sizes", "", "| role | prompts | mean chars | max chars | largest parts (mean chars) |",
             "|---|---|---|---|---|"]
    for role, size in sizes.items():
        parts = sorted(size["parts"].items(), key=lambda item: -item[1])[:3]
        lines.append(f"| {role} | {size['prompts']} | {size['mean_chars']:.0f} | {size['max_chars']} | "
                     + ", ".join(f"{part} {chars:.0f}" for part, chars in parts) + " |")
    return lines


def profiler_lines(profiles: dict) -> list[str]:
    """What profiler feedback cost (``fitness.profile``): kernels profiled and the wall time of each run."""
    timed = [p["wall_s"] for p in profiles.values() if "wall_s" in p]
    if not profiles:
        return []
    notes = sorted({p["note"] for p in profiles.values() if p.get("note")})
    return (["", "## Profiler feedback", "", f"{sum('kernels' in p for p in profiles.values())} of {len(profiles)} "
             f"kernels profiled" + (f"; {sum(timed) / len(timed):.1f} s per profiling run" if timed else "")]
            + [f"- {note}" for note in notes])

