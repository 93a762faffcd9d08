"""The bench's table per KernelBench level (evo/benchmark/bench_table.py): correct rates over the attempted runs and
over the whole level, fast_p and geometric means against each baseline, the best and the best Triton-expressible one,
the failures grouped by cause, the rows whose best baseline is a library call
(fitness.measure.baselines.library_kernels), the GPU kernels that run only at the problem's sizes per level and per row
(evo.runs.other_sizes), and `kernelevo table` over several bench directories (kernelevo/tables.py).
Rows are written by hand (fake baseline readings), at CPU speed; one test compiles a Linear with torch.compile to read
Inductor's code."""
import json

import pytest

from conftest import kernelevo
from evo.benchmark.bench import Row
from evo.benchmark.bench_report import short_label, write_bench_report
from evo.benchmark.bench_table import (cause_of, failure_of, failure_reasons, failures, level_of, paper_summary,
                                       sections)
from kernelevo.tables import check_table, gather, write_table
from kernelevo.config.schema import TableConfig
from omegaconf import OmegaConf
from evo.reports.outcome import RunOutcome, outcome_of
from evo.records.store import RunStore
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from fitness.measure import baseline_cache
from fitness.measure.baselines import (EAGER_AT_BREAK, Baseline, compiled_library, graph_breaks, inductor_code,
                                       library_kernels, library_of, measure, triton_best)
from kernelevo.core.evaluation_record import EvalResult
from fitness.measure.timing import TimingStats

SEED = "import triton\n\nBLOCK = 64\n"
CUBLAS = {"compile": ["cuBLAS extern_kernels.mm"], "max_autotune": ["cuBLAS extern_kernels.mm"]}


def stats(seconds: float) -> TimingStats:
    return TimingStats.from_samples("cuda-events", [seconds])


def gpu_row(name: str, time_s: float, eager: float, compile_: float, max_autotune: float, library=None,
            seed=None) -> Row:
    """A correct run of `name` on a GPU: its kernel `time_s` against the three baselines (us), whose code calls
    the library kernels `library` (None: not known)."""
    baseline = Baseline(stats(eager * 1e-6), stats(compile_ * 1e-6), [], stats(max_autotune * 1e-6),
                        dict.fromkeys(("eager", "compile", "max_autotune"), "ok"), library=library or {})
    result = EvalResult(status="ok", problem=name, device="cuda:0", timer="cuda-events", time_s=time_s * 1e-6,
                        policy={"name": "triton"}, **baseline.figures(time_s * 1e-6))
    best = Individual("1.0", Genome.from_source(SEED), ("0.0",), "param_mutation", 1, result)
    return Row(name, "ok", gpu="NVIDIA H100", summary=outcome_of(best, None, None, "seed"), search_seed=seed)


def failed(name: str, reason: str, status: str = "failed", summary_reason: str = "") -> Row:
    summary = RunOutcome(status=status, reason=summary_reason) if summary_reason else RunOutcome()
    return Row(name, status, reason, summary=summary)


def test_library_kernels_are_read_from_inductors_code_and_name_the_library():
    code = ("from torch._inductor.select_algorithm import extern_kernels\naten = torch.ops.aten\n"
            "buf0 = empty_strided_cuda((8, 8), (8, 1), torch.float32)\n"
            "extern_kernels.mm(arg0_1, reinterpret_tensor(arg1_1, (8, 8), (1, 8), 0), out=buf0)\n"
            "buf1 = extern_kernels.convolution(arg2_1, arg3_1, stride=(1, 1))\n"
            "triton_poi_fused_relu_0.run(buf0, 64, stream=stream0)\n")
    assert library_kernels([code]) == ["cuBLAS extern_kernels.mm", "cuDNN extern_kernels.convolution"]
    assert library_kernels(["triton_poi_fused_relu_0.run(buf0, 64)\naten = torch.ops.aten\n"]) == []
    assert library_kernels(["buf = torch.ops.aten._scaled_dot_product_flash_attention.default(q, k, v)"]) == \
        ["flash attention torch.ops.aten._scaled_dot_product_flash_attention"]
    # max-autotune's GEMM with a bias on 2 x H200 (level2/28, 55, 80, 98): a cuBLAS call, not an unnamed library
    assert library_kernels(["buf2 = extern_kernels.bias_addmm(arg1_1, buf0, arg2_1)"]) == \
        ["cuBLAS extern_kernels.bias_addmm"]


@pytest.mark.slow
def test_the_code_torch_compile_writes_is_read_as_it_compiles(monkeypatch):
    """The baseline job's hook (GraphLowering.save_output_code) on a real compile: a Linear keeps its library GEMM
    (addmm) in Inductor's code, a ReLU is Triton only. Inductor writes Triton for the CPU here, as the seed capture
    does, which the interpreter runs (its C++ backend's gcc build of the ReLU took 43 of this test's 55 s)."""
    import torch
    import torch._inductor.config as inductor_config
    import torch.utils._triton as triton_utils

    monkeypatch.setattr(inductor_config, "cpu_backend", "triton")
    monkeypatch.setattr(triton_utils, "triton_hash_with_backend", lambda: "interpreter")  # no GPU backend to hash
    linear = torch.compile(torch.nn.Linear(8, 8))
    with inductor_code() as codes:
        linear(torch.randn(4, 8))
    assert [k.split(" ", 1)[1] for k in library_kernels(codes)] == ["extern_kernels.addmm"]
    relu = torch.compile(lambda x: torch.relu(x) * 2)
    with inductor_code() as codes:
        relu(torch.randn(4, 8))
    assert codes and library_kernels(codes) == []


def test_a_compiled_baseline_with_a_graph_break_is_never_counted_triton_expressible():
    """level3/35 on an H200: Dynamo wraps no nn.LSTM, so torch.compile's baselines ran cuDNN's LSTM eagerly while
    Inductor's code for the rest called no library kernel; the row counted eager (0.42x) as Triton-expressible.
    Dynamo's graph break now reaches the baseline's library list, which then names it."""
    import torch

    class Model(torch.nn.Module):  # the nn.LSTM inside a forward, as KernelBench's are (then only `unimplemented`)
        def __init__(self):
            super().__init__()
            self.lstm, self.fc = torch.nn.LSTM(4, 8, batch_first=True), torch.nn.Linear(8, 2)

        def forward(self, x):
            return self.fc(self.lstm(x)[0][:, -1])

    for model in (Model(), torch.nn.LSTM(4, 8, batch_first=True)):  # Dynamo only (backend="eager"): nothing built
        with graph_breaks() as breaks:
            torch.compile(model, backend="eager")(torch.randn(2, 3, 4))
        assert len(breaks) == 1 and "LSTM" in breaks[0] and "\n" not in breaks[0]
    library = compiled_library(["triton_poi_fused_relu_0.run(buf0, 64)"], breaks)
    assert library == [f"{EAGER_AT_BREAK}: {breaks[0]}"[:160]]
    record = {"speedup_vs_eager": 0.42, "speedup_vs_compile": 0.43, "speedup_vs_max_autotune": 0.5,
              "baseline_library": {"compile": library, "max_autotune": library}}
    assert library_of(record, "eager") == library and triton_best(record) is None
    relu = torch.compile(lambda x: torch.relu(x) * 2, backend="eager")
    with graph_breaks() as none:
        relu(torch.randn(4))
    assert none == [] and compiled_library([], none) == []
    assert triton_best({**record, "baseline_library": {"compile": [], "max_autotune": []}}) == ("eager", 0.42)


def test_the_baseline_jobs_library_kernels_reach_the_result_and_the_machines_cache(tmp_path):
    class Outcome:
        status, stage, wall_s = "ok", "", 1.0
        result = {"status": "ok", "timing": {"eager": stats(30e-6).to_dict(), "compile": stats(20e-6).to_dict()},
                  "library": {"compile": ["cuBLAS extern_kernels.mm"]}}

    baseline = measure(lambda names: Outcome(), ["eager", "compile"], 1, lambda o: "", None)
    assert baseline.library == {"compile": ["cuBLAS extern_kernels.mm"]}
    assert baseline.figures(10e-6)["baseline_library"] == {"compile": ["cuBLAS extern_kernels.mm"]}
    path = tmp_path / "b.json"
    path.write_text(baseline_cache.to_json(baseline, {"problem": "p"}, 1.0))
    assert baseline_cache.from_json(path.read_text(), path).library == baseline.library
    older = json.loads(path.read_text())
    del older["library"]  # a file of before: measured again (once), not read as "no library kernel"
    cached = baseline_cache.path_for(tmp_path, {"problem": "p"})
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(older))
    calls = []
    again = baseline_cache.cached_or_measured(tmp_path, {"problem": "p"}, lambda: calls.append(1) or baseline)
    assert calls == [1] and again.library == baseline.library
    assert baseline_cache.cached_or_measured(tmp_path, {"problem": "p"}, lambda: calls.append(2)).library == \
        baseline.library and calls == [1]  # kept with its library kernels: read back, not measured a third time


def test_the_best_triton_expressible_baseline_leaves_out_library_calls_and_eager_follows_compile():
    row = gpu_row("level1/1_Square_matrix_multiplication_.py", 10, 40, 20, 8, CUBLAS)
    assert row.summary.best_baseline == "max_autotune" and row.summary.baseline_library == CUBLAS
    assert triton_best(vars(row.summary)) is None  # eager calls cuBLAS where compile does: none is Triton
    mixed = gpu_row("level2/9_Matmul.py", 10, 40, 20, 8, {"compile": ["cuBLAS extern_kernels.mm"],
                                                          "max_autotune": []})
    assert triton_best(vars(mixed.summary)) == ("max_autotune", pytest.approx(0.8))
    fused = gpu_row("level1/19_ReLU.py", 10, 30, 20, 15, {"compile": [], "max_autotune": []})
    assert triton_best(vars(fused.summary)) == ("max_autotune", pytest.approx(1.5))  # eager counts: no library
    assert triton_best(vars(gpu_row("level1/23_Softmax.py", 10, 30, 20, 15).summary)) is None  # not known


def test_fast_p_and_geometric_means_per_level_against_each_baseline(tmp_path):
    rows = [gpu_row("level1/19_ReLU.py", 10, 30, 20, 15, {"compile": [], "max_autotune": []}),  # 1.5x over best
            gpu_row("level1/1_Square_matrix_multiplication_.py", 10, 40, 20, 8, CUBLAS),  # 0.8x, best cuBLAS
            failed("level1/54_conv_standard_3D.py", "exit code 2: Inductor's code for 54 calls library kernels "
                   "(torch.convolution) for which it has no Triton form here: ..."),
            gpu_row("level2/9_Matmul.py", 10, 12, 11, 9, {"compile": ["cuBLAS extern_kernels.mm"],
                                                           "max_autotune": []}),  # 0.9x over max-autotune
            failed("level3/1_MLP.py", "exit code 2: the converter failed on Inductor's code for 1_MLP "
                   "(AttributeError: 'Sequential' object ...)")]
    paper = paper_summary(rows, {"level1": 100, "level2": 100, "level3": 50})
    one, two, three = paper["levels"]
    assert (one["level"], one["attempted"], one["correct"], one["size"]) == ("level1", 3, 2, 100)
    assert one["correct_of_attempted"] == pytest.approx(2 / 3) and one["correct_of_level"] == pytest.approx(0.02)
    best = one["against"]["best"]
    assert (best["fast_0"], best["fast_1"], best["fast_1.5"]) == (pytest.approx(2 / 3), pytest.approx(1 / 3), 0.0)
    assert best["geomean"]["value"] == pytest.approx((1.5 * 0.8) ** 0.5) and best["measured"] == 2
    assert one["against"]["eager"]["fast_1.5"] == pytest.approx(2 / 3)  # 3x and 4x over eager
    triton = one["against"]["triton_best"]  # ReLU 1.5x over max-autotune; the GEMM: no Triton baseline known
    assert triton["measured"] == 1 and triton["geomean"]["value"] == pytest.approx(1.5)
    assert triton["fast_1"] == pytest.approx(1 / 3)
    assert one["library_best"] == {"level1/1_Square_matrix_multiplication_.py": "max-autotune (cuBLAS "
                                                                                  "extern_kernels.mm)"}
    assert two["against"]["best"]["fast_0"] == 1.0 and two["against"]["best"]["fast_1"] == 0.0
    assert two["library_best"] == {}  # its best baseline, max-autotune, is Triton
    assert (three["correct"], three["correct_of_level"]) == (0, 0.0)
    summary = write_bench_report(tmp_path, rows, "three levels", {"level_sizes": {"level1": 100}})
    table = (tmp_path / "bench.md").read_text()
    assert "| level1 | 100 | 3 | 2 of 3 | 67% | 2% | 0 | 1 |" in table
    assert "| level2 | ? | 1 | 1 of 1 | 100% | - | 0 | 0 |" in table  # its size not known: no rate over it
    assert "| level1 | best baseline | 67% | 33% | 0% | 1.10x over 2 |" in table
    assert "| level1 | best Triton-expressible baseline | 33% | 33% | 0% | 1.50x over 1 |" in table
    assert "best baseline: max-autotune (cuBLAS extern_kernels.mm); no baseline known to be Triton-expressible" \
        in table
    assert "| level1/1_Square_matrix_multiplication_.py | max-autotune (cuBLAS extern_kernels.mm) |" in table
    assert "<h2>Failures by cause</h2>" in (tmp_path / "bench.html").read_text()
    assert ("- without a correct kernel: converter: AttributeError 1 (level3/1_MLP.py); library call: "
            "torch.convolution 1 (level1/54_conv_standard_3D.py)") in table  # each cause's problems beside its count
    assert "| library call: torch.convolution | 1 | level1/54_conv_standard_3D.py | exit code 2: Inductor's code" \
        in table  # the reasons' first lines beside the count
    assert "<td>converter: AttributeError</td><td>1</td><td>level3/1_MLP.py</td><td>exit code 2: the converter failed" \
        in (tmp_path / "bench.html").read_text()
    assert json.loads((tmp_path / "bench.json").read_text())["summary"]["paper"] == json.loads(json.dumps(
        summary["paper"]))


def test_a_sweeps_rows_are_placed_in_their_kernelbench_level_and_bundled_problems_get_no_per_level_table():
    # a multirun's rows are named by their overrides: the per-level table read "other | ?" (issue 68)
    assert level_of("problem=/work/KernelBench/level1/19_ReLU.py") == "level1"
    assert level_of("problem=/work/KernelBench/level1/19_ReLU.py fitness/policy=strict-fp32") == "level1"
    assert level_of("problem=rmsnorm") == level_of("problem=/tmp/level1/x/own.py") == "other"
    bundled = [failed("problem=rmsnorm", "1 generation done", "incorrect", "trial 1: wrong"),
               gpu_row("problem=row_softmax", 10, 30, 20, 15)]
    titles = [section["title"] for section in sections(paper_summary(bundled), gpu=True)]
    assert titles == ["Failures by cause"]  # no level to speak of
    mixed = sections(paper_summary([*bundled, gpu_row("problem=/k/KernelBench/level1/19_ReLU.py", 10, 30, 20, 15)],
                                   {"level1": 100}), gpu=True)
    assert [row[:3] for row in mixed[0]["rows"]] == [["level1", "100", "1"], ["other (not KernelBench)", "-", "2"]]
    assert short_label("problem=/work/shared/KernelBench/level1/19_ReLU.py search.seed=3") == \
        "problem=.../level1/19_ReLU.py search.seed=3"  # a plot's axis: the path by its last two parts
    assert short_label("x" * 60) == "x" * 45 + "..."


def test_two_search_seeds_give_each_levels_geometric_mean_an_interval(tmp_path):
    rows = [gpu_row(f"level1/{i}_P.py", 10, 30, 20, t, seed=s) for i, base in ((1, 11), (2, 14), (3, 9))
            for s, t in ((0, base), (1, base + 1))]
    level = paper_summary(rows)["levels"][0]
    assert level["seeds"] == 2 and level["attempted"] == 3 and level["runs"] == 6
    mean = level["against"]["max_autotune"]["geomean"]
    assert mean["low"] is not None and mean["low"] <= mean["value"] <= mean["high"]


def test_failures_are_grouped_by_a_short_cause_with_their_problems():
    rows = [failed("level1/63_conv.py", "exit code 2: Inductor's code for 63 calls library kernels "
                   "(torch.convolution) for which it has no Triton form here: policy 'triton' rejects ..."),
            failed("level2/1_Conv2D.py", "exit code 2: Inductor's code for 1 calls library kernels "
                   "(torch.convolution) for which ..."),
            failed("level1/97_SDPA.py", "exit code 2: Inductor generated no Triton kernel for this problem (it "
                   "calls library kernels only): pass a seed file"),
            failed("level3/1_MLP.py", "exit code 2: the converter failed on Inductor's code for 1_MLP (KeyError: "
                   "'network.0.weight'); pass a seed file"),
            failed("level3/43_Attn.py", "exit code 2: kernel triton_red_0: Inductor's grid type Grid2DWithYZOverflow "
                   "is not converted: ..."),
            failed("level3/28_ViT.py", "exit code 2: Inductor calls the ATen operator aten._sdpa directly; ..."),
            failed("level3/35_LSTM.py", "exit code 2: torch.compile of 35_LSTM failed, so there is no Inductor seed"),
            failed("level2/14_Gemm.py", "5 generations done", "incorrect", "trial 1 (input seed 7): output: 3 of 8 "
                   "elements exceed atol=0.01"),
            failed("level1/94_MSE.py", "5 generations done", "incorrect", "coverage trial: predictions[3] changed"),
            failed("level1/5_Big.py", "timed out: the search ran past the bench's limit"),
            failed("level1/6_X.py", "implausible time: 5 us is below the data floor", "rejected",
                   "implausible time: 5 us is below the data floor"),
            failed("level1/7_Y.py", "exit code 1: baseline timing failed: CUDA out of memory"),
            Row("level1/8_Z.py", "not started", "the bench was interrupted before it began"),
            failed("level1/29_Softplus.py", "5 generations done", "compile_error", "InterpreterError: "
                   "AttributeError(\"'NoneType' object has no attribute 'dtype'\")\nTraceback ..."),
            gpu_row("level1/19_ReLU.py", 10, 30, 20, 15)]
    assert level_of("level3/1_MLP.py") == "level3" and level_of("row_softmax") == "other"
    assert cause_of(rows[-1]) is None
    groups = failures(rows)
    assert list(groups)[0] == "library call: torch.convolution"  # the most frequent first
    assert groups["library call: torch.convolution"] == ["level1/63_conv.py", "level2/1_Conv2D.py"]
    assert groups["no Triton from Inductor"] == ["level1/97_SDPA.py"]
    assert groups["converter: KeyError"] == ["level3/1_MLP.py"]
    assert groups["converter: grid Grid2DWithYZOverflow"] == ["level3/43_Attn.py"]
    assert groups["converter: ATen operator aten._sdpa"] == ["level3/28_ViT.py"]
    assert groups["torch.compile failed"] == ["level3/35_LSTM.py"]
    assert groups["incorrect: trial"] == ["level2/14_Gemm.py"]
    assert groups["incorrect: coverage trial"] == ["level1/94_MSE.py"]
    assert groups["timeout"] == ["level1/5_Big.py"] and groups["baseline failed"] == ["level1/7_Y.py"]
    assert groups["rejected: implausible time"] == ["level1/6_X.py"] and groups["not started"] == ["level1/8_Z.py"]
    assert groups["compile_error: InterpreterError"] == ["level1/29_Softplus.py"]  # another status: its reason's head
    reasons = failure_reasons(rows)  # each cause's reasons, first lines, beside their counts (issue 68)
    assert reasons["compile_error: InterpreterError"] == ("InterpreterError: AttributeError(\"'NoneType' object has "
                                                          "no attribute 'dtype'\") (1)")
    assert reasons["library call: torch.convolution"].startswith("exit code 2: Inductor's code for 63 calls library "
                                                                 "kernels")
    assert reasons["library call: torch.convolution"].endswith("; exit code 2: Inductor's code for 1 calls library "
                                                               "kernels (torch.convolution) for which ... (1)")
    assert failure_of(rows[-2]) == ("InterpreterError: AttributeError(\"'NoneType' object has no attribute "
                                    "'dtype'\"); 5 generations done")  # the failure first, then how the run ended
    assert failure_of(rows[-1]) == ""
    assert sum(len(v) for v in groups.values()) == len(rows) - 1


def bench_dir(folder, rows: list[Row], settings: dict | None = None, level_sizes: dict | None = None):
    """A bench directory as `kernelevo bench` leaves it: rows/<slug>.json and, with `settings`, each problem's run
    store holding that config."""
    from evo.benchmark.bench import slug

    for row in rows:
        (folder / "rows").mkdir(parents=True, exist_ok=True)
        (folder / "rows" / f"{slug(row.name, row.search_seed)}.json").write_text(row.to_json())
        if settings is not None:
            store = RunStore(folder / "runs" / slug(row.name, row.search_seed))
            store.set_meta("config", settings)
            store.close()
    if level_sizes:
        (folder / "bench.json").write_text(json.dumps({"level_sizes": level_sizes}))
    return folder


def test_kernelevo_table_merges_bench_directories_and_refuses_a_problem_with_other_settings(tmp_path, capsys):
    budget = {"search": {"wall_time_s": 15}}
    relu = gpu_row("level1/19_ReLU.py", 10, 30, 20, 15)
    a = bench_dir(tmp_path / "a", [relu, failed("level1/5_Big.py", "timed out")], budget, {"level1": 100})
    b = bench_dir(tmp_path / "b", [gpu_row("level2/9_Matmul.py", 10, 12, 11, 9),
                                   gpu_row("level1/5_Big.py", 10, 30, 20, 15)], budget, {"level2": 100})
    done = kernelevo("table", f"bench_dirs=[{a},{b}]", f"out={tmp_path / 'all'}", cwd=tmp_path)
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "level1/5_Big.py: in " in out and "the later in bench_dirs) is kept" in out
    merged = json.loads((tmp_path / "all" / "table.json").read_text())
    assert sorted(r["name"] for r in merged["rows"]) == ["level1/19_ReLU.py", "level1/5_Big.py", "level2/9_Matmul.py"]
    assert merged["level_sizes"] == {"level1": 100, "level2": 100} and merged["summary"]["correct"] == 3
    assert "| level1 | 100 | 2 | 2 of 2 | 100% | 2% |" in (tmp_path / "all" / "table.md").read_text()
    other = bench_dir(tmp_path / "c", [relu], {"search": {"wall_time_s": 60}})
    done = kernelevo("table", f"bench_dirs=[{a},{other}]", f"out={tmp_path / 'clash'}", cwd=tmp_path)
    err = done.stderr
    assert done.returncode == 2 and err.count("\n") == 1
    assert f"level1/19_ReLU.py is in {a} and {other} with other settings (search.wall_time_s: 15.0 -> 60.0)" in err
    assert "leave one of those directories out of bench_dirs" in err and not (tmp_path / "clash").exists()
    assert "or keep the later directory's row (later_wins=true)" in err
    # parts re-run at fixed code: with later_wins the later row stands (the command's plan, in this process)
    write_table(check_table(OmegaConf.structured(TableConfig(bench_dirs=[str(a), str(other)],
                                                             out=str(tmp_path / "later"), later_wins=True))))
    later = json.loads((tmp_path / "later" / "table.json").read_text())
    assert sorted(r["name"] for r in later["rows"]) == ["level1/19_ReLU.py", "level1/5_Big.py"]
    assert f"the row of {other} (the later in bench_dirs, later_wins) is kept" in capsys.readouterr().out
    rows, run_dirs, lines = gather([a, other], later_wins=True)
    assert run_dirs["level1/19_ReLU.py"].parent.parent == other
    assert lines == [f"level1/19_ReLU.py: in {a} and {other} with other settings (search.wall_time_s: 15.0 -> "
                     f"60.0); the row of {other} (the later in bench_dirs, later_wins) is kept"]
    done = kernelevo("table", f"bench_dirs=[{a},{tmp_path / 'none'}]", f"out={tmp_path / 'x'}", cwd=tmp_path)
    assert done.returncode == 2 and "holds no bench (no rows/ folder in it)" in done.stderr and not (tmp_path / "x").exists()


def test_each_level_counts_its_gpu_kernels_that_run_only_at_the_problems_sizes(tmp_path):
    # evo.runs.other_sizes' verdicts in the rows' summaries; a row from before that check has none: not checked
    generic, specialised, old = (gpu_row(f"level1/{i}_P.py", 10, 30, 20, 15) for i in (1, 2, 3))
    generic.summary.runs_at_other_sizes, generic.summary.other_sizes_note = True, "yes, correct at N=3072 too"
    failed_at = ("no, specialised to the problem's sizes (N=4096); failed at N=3072: incorrect (output has shape "
                 "(4096,), expected (3072,))")
    specialised.summary.runs_at_other_sizes, specialised.summary.other_sizes_note = False, failed_at
    unchecked = gpu_row("level2/4_Q.py", 10, 30, 20, 15)
    unchecked.summary.other_sizes_note = "not checked (the problem has no size constants to change)"
    rows = [generic, specialised, old, unchecked]
    one, two = paper_summary(rows)["levels"]
    assert one["specialised"] == {"level1/2_P.py": f"runs at other sizes: {failed_at}"}
    assert one["sizes_not_checked"] == 1 and (two["specialised"], two["sizes_not_checked"]) == ({}, 1)
    write_bench_report(tmp_path, rows, "sizes", {})
    table = (tmp_path / "bench.md").read_text()
    assert "| level1 | ? | 3 | 3 of 3 | 100% | - | 0 | 0 | 1 (1 not checked) |" in table
    assert "- correct: 4 of 4 (100%); 1 of them run only at the problem's sizes (they failed at other sizes)" in table
    assert "| level2 | ? | 1 | 1 of 1 | 100% | - | 0 | 0 | 0 (1 not checked) |" in table
    assert f"| level1/2_P.py | runs at other sizes: {failed_at} |" in table  # the section listing them
    notes = {line.split(" | ")[0][2:]: line.split("|")[-2].strip() for line in table.splitlines()
             if line.startswith("| level") and " | ok | " in line}  # the last column of each problem's row
    assert notes == {"level1/1_P.py": "", "level1/2_P.py": f"runs at other sizes: {failed_at}",
                     "level1/3_P.py": "runs at other sizes: not checked",
                     "level2/4_Q.py": "runs at other sizes: not checked (the problem has no size constants to "
                                      "change)"}
