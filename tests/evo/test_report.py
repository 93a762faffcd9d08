"""A run's report (report.html, report.md) drawn from a run store written through its typed API: the summary with
or without speed-ups, the lineage tree down to the seed through a crossover, the diff (escaped), per-operator
rates, LLM usage per role. The end-to-end checks (a tiny run writes the page, `kernelevo report` rewrites it, a
multirun and a bench write a combined page) are in test_search.py and test_bench.py. A label of the best kernel's
verdict (uses-torch-compute) reaches summary.json, the run's table and report, and the bench and multirun tables."""
import html
import json
import re
from dataclasses import replace

import pytest

from conftest import candidate, make_evaluator
from kernelevo.core.errors import KernelevoError
from evo.benchmark.bench import Row
from evo.reports import console
from evo.records.checkpoint import Checkpoint
from evo.benchmark.bench_report import write_bench_report
from evo.benchmark.multirun import write_multirun_report
from evo.reports.report_html import write_report
from evo.reports.outcome import descends_from, summarise
from evo.records.store import RunStore
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from fakes import REPORT_SEED, result, write_run

def text_of(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.mark.parametrize("timer", ["cuda-events", "interpreter"])
def test_the_page_holds_summary_plot_lineage_diff_operators_llm_and_policy(tmp_path, timer):
    write_run(tmp_path, timer)
    page = write_report(tmp_path).read_text()
    assert page.startswith("<!doctype html>") and "<style>" in page
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)  # self-contained: nothing fetched
    assert "data:image/png;base64," in page and (tmp_path / "fitness.png").stat().st_size > 1000
    text = text_of(page)
    if timer == "cuda-events":  # the figures of summary.json, with the seed as written and tuned
        for figure in ("best kernel time2.000 ms", "seed kernel time (as written)5.000 ms",
                       "seed kernel time (tuned)4.000 ms", "speed-up vs seed (as written)2.50x",
                       "speed-up vs eager5.00x", "speed-up vs torch.compile4.00x", "fraction of the data floor25.0%",
                       "fraction of the reference algorithm's roofline (over 100 %: fewer FLOPs than the "
                       "reference)50.0%",
                       "device / hardware profile / timercuda:0 / h100_sxm / cuda-events"):
            assert figure in text
    else:  # the interpreter: correct or not and its wall-clock times, labelled; no speed-up anywhere
        assert not re.search(r"\d\.\d\dx", text) and "speed-up vs" not in text
        assert "best kernel, interpreter wall-clock2.000 ms" in text
        assert "seed kernel time (interpreter wall-clock, as written)5.000 ms" in text
        assert "No speed-up: the kernel is correct, but its times are Triton's CPU interpreter's wall-clock" in text
    # the lineage: the best kernel, then what it was made from, down to the seed; operator and change on each edge
    tree = page[page.index("<ul class='tree'>"):]
    tree = tree[:tree.index("</ul></li></ul>") + 15]
    labels = re.findall(r"<code>(\d\.\d) ", tree)
    assert labels == ["2.0", "1.0", "0.0", "0.0"]  # the seed reached twice through the crossover, drawn once
    assert "(shown above)" in tree and "0.0 seed, generation 0" in tree
    change = {"cuda-events": ["crossover, 1.50x", "param_mutation, 1.33x", "crossover, 2.00x"],
              "interpreter": ["crossover, interpreter wall-clock 3.000 ms -&gt; 2.000 ms",
                              "param_mutation, interpreter wall-clock 4.000 ms -&gt; 3.000 ms",
                              "crossover, interpreter wall-clock 4.000 ms -&gt; 2.000 ms"]}[timer]
    assert re.findall(r"&#9650; ([^<]*)</span>", tree) == change
    # the diff against the seed as written, escaped: kernel source with < and & never becomes markup
    assert "<span class='del'>-BLOCK = 64</span>" in page and "<span class='add'>+BLOCK = 256</span>" in page
    assert "+    mask = (offs &lt; n) &amp; (offs &gt;= 0)" in page and "offs < n" not in page
    # per operator: children made, correct, improved on their parents; LLM usage per role (cache replays apart)
    assert "crossover111100%100%2$0.0300" in text and "space_mutation1000%0%0$0.0000" in text
    assert "param_mutation111100%100%" in text
    assert "coderopenai/gpt-4o1110050$0.0200" in text and "planneropenai/gpt-4o1010050$0.0100" in text
    assert "float32" in text and "bfloat160.010.010.02" in text and "torch_computereject" in text
    assert "best kernel descends fromseed" in text  # the crossover's two lines both lead to the one seed
    markdown = (tmp_path / "report.md").read_text()
    assert "| speed-up vs eager | 5.00x |" in markdown if timer == "cuda-events" else "speed-up vs" not in markdown
    assert "*crossover" in markdown and "`0.0 seed, generation 0" in markdown and "+BLOCK = 256" in markdown


def test_a_run_whose_seed_fails_gets_a_page_saying_so(tmp_path):
    store = RunStore(tmp_path)
    seed = Individual("0.0", Genome.from_source(REPORT_SEED), (), "inductor", 0,
                      result(None, "interpreter", "incorrect"))
    store.add_individual(seed)
    store.add_evaluation(seed.key, seed.result)
    store.save_checkpoint(Checkpoint(0, logbook=[{"gen": 0, "nevals": 1, "evaluations": 1, "best": float("inf"),
                                                  "median": float("inf"), "correct": 0}], hall_of_fame=["0.0"]))
    store.close()
    text = text_of(write_report(tmp_path).read_text())
    assert "best kernelno correct kernel (incorrect: wrong values)" in text
    assert "0.0 inductor, generation 0: incorrect" in text and "incorrect1wrong values (1)" in text
    assert "No speed-up: the run found no correct kernel (why: the failures under Evaluations)." in text
    assert "the kernel is correct" not in text  # the one reason that holds, not both


def test_a_run_without_a_finished_generation_has_no_report(tmp_path):
    RunStore(tmp_path).close()
    with pytest.raises(KernelevoError, match="no finished generation yet"):
        write_report(tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_the_best_kernel_is_traced_to_every_seed_of_generation_0_it_descends_from(tmp_path):
    store = RunStore(tmp_path)
    seed = Genome.from_source(REPORT_SEED)
    made = [Individual("0.0", seed, (), "inductor", 0, result(0.004, "cuda-events")),
            Individual("0.1", seed.with_params({"BLOCK": 128}), (), "inductor:nd_tiling", 0,
                       result(0.003, "cuda-events")),
            Individual("1.0", seed.with_params({"BLOCK": 256}), ("0.1",), "param_mutation", 1,
                       result(0.002, "cuda-events")),
            Individual("2.0", seed.with_params({"BLOCK": 512}), ("1.0", "0.0"), "crossover", 2,
                       result(0.001, "cuda-events"))]
    for ind in made:
        store.add_individual(ind)
    by_id = {ind.id: ind for ind in made}
    assert descends_from(store, by_id["2.0"]) == "inductor+inductor:nd_tiling"
    assert descends_from(store, by_id["1.0"]) == "inductor:nd_tiling"
    assert descends_from(store, by_id["0.0"]) == "inductor" and descends_from(store, None) == ""
    store.close()


def test_a_best_kernel_computing_in_torch_is_labelled_in_every_table_and_report(tmp_path, sandbox):
    source = candidate("torch_compute")
    # the policy allows torch compute and labels it
    with make_evaluator(policy="kernelbench", trials=1, sandbox=sandbox) as ev:
        judged = ev.evaluate(source)
    assert judged.ok and judged.labels == ["uses-torch-compute"], judged.reason
    run_dir = tmp_path / "sweep" / "0"
    store = RunStore(run_dir)
    best = Individual("0.0", Genome.from_source(source), (), "seed", 0, judged)
    store.add_individual(best)
    store.add_evaluation(best.key, judged)
    store.save_checkpoint(Checkpoint(0, hall_of_fame=["0.0"], elapsed_s=1.0, best_s=judged.time_s,
                                     logbook=[{"gen": 0, "nevals": 1, "evaluations": 1, "best": judged.time_s,
                                               "median": judged.time_s, "correct": 1}]))
    summary = summarise(store, store.latest_checkpoint(), "0 generations done")
    store.close()
    assert summary.labels == ["uses-torch-compute"] and summary.policy == "kernelbench"  # summary.json, a bench row
    assert re.search(r"^  labels +uses-torch-compute \(forward computes part of its output with torch ops",
                     console.table(summary), re.M)
    page = text_of(write_report(run_dir).read_text())
    assert "labelsuses-torch-compute (forward computes" in page and "0.0 seed, generation 0: " in page
    assert "[uses-torch-compute]" in page  # on the kernel in the lineage too
    summary.write(run_dir)
    plain = tmp_path / "sweep" / "1"  # a run whose best is all Triton: no label
    RunStore(plain).close()
    replace(summary, labels=[]).write(plain)

    rows = [Row("scale_shift", "ok", summary=summary), Row("all_triton", "ok", summary=replace(summary, labels=[]))]
    bench = write_bench_report(tmp_path, rows, "two problems", {})
    assert bench["labelled"] == {"uses-torch-compute": 1}
    table = (tmp_path / "bench.md").read_text()
    assert "| scale_shift | ok, uses-torch-compute |" in table and "| all_triton | ok |" in table
    assert "- correct: 2 of 2 (100%); 1 of them uses-torch-compute" in table
    assert "<td>ok, uses-torch-compute</td>" in (tmp_path / "bench.html").read_text()
    write_multirun_report(tmp_path / "sweep")
    sweep = json.loads((tmp_path / "sweep" / "multirun.json").read_text())
    assert [r["summary"]["labels"] for r in sweep["rows"]] == [["uses-torch-compute"], []]
    assert sweep["summary"]["labelled"] == {"uses-torch-compute": 1}
    assert "| [0](0/report.html) | ok, uses-torch-compute |" in (tmp_path / "sweep" / "multirun.md").read_text()
