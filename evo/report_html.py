"""A run's report as one self-contained HTML page (report.html): the data `evo.report.collect` gathered, drawn with
the shared page helper (`evo/page.py`)."""
from __future__ import annotations

from evo.page import Raw, esc, page, png_img, table
from evo.anytime import curve_header, curve_rows
from evo.report import (ANYTIME_NONE, GENERATION_HEADER, LLM_HEADER, OPERATOR_HEADER, PLOT_FILE, POLICY_HEADER,
                        REPORT_FILE, Node, RunReport, profiler_lines)


def tree(node: Node) -> Raw:
    """The lineage as a nested list: each kernel above what it was made from, the operator and change on the edge."""
    def item(n: Node) -> str:
        edge = f"<span class='edge'>&#9650; {esc(n.edge)}</span> " if n.edge else ""
        seen = " <span class='note'>(shown above)</span>" if n.repeated else ""
        below = f"<ul>{''.join(item(p) for p in n.parents)}</ul>" if n.parents else ""
        return f"<li>{edge}<code>{esc(n.label)}</code>{seen}{below}</li>"

    return Raw(f"<ul class='tree'>{item(node)}</ul>")


def diff_block(lines: list[str]) -> Raw:
    """A unified diff, each line escaped and coloured by its kind."""
    def kind(line: str) -> str:
        if line.startswith(("+++", "---")):
            return "hunk"
        return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")

    body = "".join(f"<span class='{kind(line)}'>{esc(line)}</span>\n" if kind(line) else esc(line) + "\n"
                   for line in lines)
    return Raw(f"<pre>{body}</pre>")


def note(text: str) -> Raw:
    return Raw(f"<p class='note'>{esc(text)}</p>")


INTERPRETER_NOTE = ("Times are wall-clock of Triton's CPU interpreter: they say whether a kernel is correct and how "
                    "long the interpreter took, not how fast it runs on a GPU; no speed-ups are computed from them.")


ANYTIME_NOTE = ("The best correct kernel's speed-up so far against what the search had spent: GPU-seconds (the "
                "evaluations' wall time, summed) and LLM cost (calls where no price is known); a point at each "
                "improvement and at the end.")


def render(report: RunReport) -> str:
    clock = " (by interpreter wall-clock)" if report.interpreter else ""
    summary = Raw(table(("figure", "value"), report.summary) + (note(INTERPRETER_NOTE) if report.interpreter else ""))
    plot = Raw(png_img(report.plot_png, "best and median time per generation") +
               table(GENERATION_HEADER, report.generations))
    anytime = Raw(note(ANYTIME_NOTE) + png_img(report.anytime_png, "best speed-up so far") +
                  table(curve_header(report.anytime), curve_rows(report.anytime))
                  ) if report.anytime_png else note(ANYTIME_NONE)
    lineage = Raw(note("From the best kernel down to the seed; each edge names the operator that made the kernel "
                       f"above it and how its time compares with the one below{clock}.") + tree(report.lineage)
                  ) if report.lineage is not None else note("No kernel was kept.")
    if report.diff:
        diff = diff_block(report.diff)
    else:
        diff = note("The best kernel is the seed as written." if report.lineage is not None else "No kernel was kept.")
    operators = Raw(note(f"improved: correct and faster than the fastest of its parents{clock}") +
                    table(OPERATOR_HEADER, report.operators)) if report.operators else note("No child was made.")
    llm = table(LLM_HEADER, report.llm) if report.llm else note("No LLM call: offline operators.")
    if report.prompt_sizes:
        sizes = [(role, size["prompts"], f"{size['mean_chars']:.0f}", size["max_chars"],
                  ", ".join(f"{part} {chars:.0f}" for part, chars in
                            sorted(size["parts"].items(), key=lambda item: -item[1])[:3]))
                 for role, size in report.prompt_sizes.items()]
        llm = Raw(llm + note("Prompt sizes per role (characters)") +
                  table(("role", "prompts", "mean chars", "max chars", "largest parts (mean chars)"), sizes))
    if report.profiles:
        llm = Raw(llm + note(" ".join(line for line in profiler_lines(report.profiles) if line and
                                      not line.startswith("#"))))
    policy = Raw(table(("setting", "value"), report.policy_facts) + table(POLICY_HEADER, report.policy))
    footer = note(f"Run directory {report.run_dir}; the same data in {REPORT_FILE} and {PLOT_FILE}; regenerate with: "
                  f"kernelevo report run_dir={report.run_dir}")
    manifest = table(("fact", "value"), report.manifest)
    return page(report.title, [("Summary", summary), ("Manifest", manifest), ("Time per generation", plot),
                               ("Best speed-up so far", anytime), ("Lineage of the best kernel", lineage),
                               ("Best kernel against the seed (as written)", diff), ("Operators", operators),
                               ("LLM calls and cost", llm), ("Precision policy", policy),
                               ("Evaluations", table(("status", "evaluations"), report.statuses.most_common())),
                               (None, footer)])
