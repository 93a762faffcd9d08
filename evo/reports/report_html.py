"""A run's report as one self-contained HTML page (report.html): the data `evo.reports.report.collect` gathered, drawn
by the template evo/reports/templates/report.html.j2 (through the shared page helper, `evo/reports/page.py`);
``write_report`` writes it with report.md and fitness.png (this module imports `evo.reports.report`, never the other
way)."""
from __future__ import annotations

from pathlib import Path

from evo.reports.page import render as render_page
from evo.reports.anytime import curve_header, curve_rows
from evo.reports.report import (GENERATION_HEADER, HTML_FILE, LLM_CHILD_HEADER, LLM_HEADER, OPERATOR_HEADER,
                        PLOT_FILE, POLICY_HEADER, REPORT_FILE, STATUS_HEADER, RunReport, collect, markdown,
                        profiler_lines)
from evo.records.store import RunStore


def diff_kind(line: str) -> str:
    """A unified diff line's kind, the class it is coloured by: add, del, hunk or none."""
    if line.startswith(("+++", "---")):
        return "hunk"
    return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")


def prompt_size_rows(prompt_sizes: dict) -> list[tuple]:
    """Per role: prompts, mean and max characters, and its three largest parts by mean characters."""
    return [(role, size["prompts"], f"{size['mean_chars']:.0f}", size["max_chars"],
             ", ".join(f"{part} {chars:.0f}" for part, chars in
                       sorted(size["parts"].items(), key=lambda item: -item[1])[:3]))
            for role, size in prompt_sizes.items()]


def render(report: RunReport) -> str:
    profiler = " ".join(line for line in profiler_lines(report.profiles) if line and not line.startswith("#"))
    return render_page(
        "report.html.j2", title=report.title, report=report, diff=[(diff_kind(line), line) for line in report.diff],
        anytime_header=curve_header(report.anytime) if report.anytime_png else (),
        anytime_rows=curve_rows(report.anytime) if report.anytime_png else (),
        prompt_sizes=prompt_size_rows(report.prompt_sizes or {}), profiler=profiler,
        generation_header=GENERATION_HEADER, operator_header=OPERATOR_HEADER, llm_header=LLM_HEADER,
        llm_child_header=LLM_CHILD_HEADER,
        policy_header=POLICY_HEADER, status_header=STATUS_HEADER, report_file=REPORT_FILE,
        plot_file=PLOT_FILE)


def write_report(run_dir: Path) -> Path:
    """report.html, report.md and fitness.png in `run_dir`; the path of report.html."""
    run_dir = Path(run_dir)
    store = RunStore(run_dir, create=False)
    try:
        report = collect(store)
    finally:
        store.close()
    (run_dir / PLOT_FILE).write_bytes(report.plot_png)
    (run_dir / REPORT_FILE).write_text(markdown(report))
    path = run_dir / HTML_FILE
    path.write_text(render(report))
    return path
