"""Seeds taken from torch.compile (kernelevo/seeds/inductor): Inductor's Triton kernels, converted into a standalone
candidate, pass the full evaluator; the seed is cached and written into the run directory; library calls under
policy `triton` get a clear way out; variants of Inductor's options that write other kernels are more seeds of
generation 0 (a KernelBench-format file without a seed runs offline from its Inductor seed: tests/e2e/test_full_size.py,
in its run from a dynamic-shape capture). On the CPU, Inductor is asked for Triton code, which Triton's interpreter
runs."""
import ast
import functools
import importlib
import json
import re

import pytest
import torch
import torch._inductor
from omegaconf import OmegaConf

from conftest import FIXTURES, PROBLEMS, REPO, TINY, kernelevo, make_evaluator, read_store, run_dir_of
from kernelevo.core.genome import Genome
from fitness.measure.baselines import COMPILED
from fitness.problems.problem import load_problem, resolve_problem
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.inductor.capture import flat_options
from kernelevo.seeds.inductor.template_choices import (TEMPLATE_OPTIONS, present, template_calls, template_choices,
                                              template_shapes)
from kernelevo.seeds.inductor.convert import SeedError, convert
from kernelevo.seeds.inductor.input_guard import GUARD


@pytest.mark.parametrize("name", ["layernorm"])  # more kinds of kernel, captured on a GPU: test_inductor_fixtures
def test_an_inductor_seed_is_a_correct_standalone_candidate_with_inductors_launch_configuration(name, sandbox):
    sizes = {"batch_size": 4, "dim": 256}  # small: the interpreter runs Inductor's reduction in seconds
    spec = resolve_problem(name, sizes=sizes)
    captured = seeds.capture(spec, "cpu")
    source = convert(captured, open(spec.path).read(), name)
    tree = ast.parse(source)
    kernels = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name != GUARD]  # forward's guard
    assert kernels and all(ast.unparse(k.decorator_list[0]) == "triton.jit" and len(k.decorator_list) == 1
                           for k in kernels)
    assert {k.name for k in kernels} == set(captured["kernels"])  # Inductor's kernels, under Inductor's names
    assert "triton_heuristics" not in source and "async_compile" not in source and "empty_strided_c" not in source
    genome = Genome.from_source(source)
    for index, kernel in enumerate(kernels):
        chosen = captured["kernels"][kernel.name]["configs"][0]
        for param, value in chosen["kwargs"].items():
            if f"K{index}_{param}" in genome.space:
                assert genome.params[f"K{index}_{param}"] == value and value in genome.space[f"K{index}_{param}"]
        assert genome.params[f"K{index}_NUM_WARPS"] == chosen["num_warps"]
    with make_evaluator(problem=name, sizes=sizes, sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason


def test_the_seed_is_cached_per_problem_and_written_into_the_run_directory(tmp_path, monkeypatch):
    spec = resolve_problem("rmsnorm", size_preset="test")
    first = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path / "cache", tmp_path)
    assert (tmp_path / seeds.SEED_FILE).read_text() == first

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(seeds, "capture_variants", no_compile)
    assert seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path / "cache") == first
    other_sizes = resolve_problem("rmsnorm", sizes={"batch_size": 3}, size_preset="test")
    with pytest.raises(AssertionError, match="compiled again"):  # other sizes: another seed
        seeds.inductor_seed(other_sizes, "cpu", "cpu_interpreter", tmp_path / "cache")


def test_library_calls_left_by_inductor_are_refused_under_policy_triton_with_the_way_out(tmp_path, sandbox):
    spec = resolve_problem("matmul_bias_relu", size_preset="test")
    with pytest.raises(SeedError, match="fitness/policy=kernelbench") as refused:
        seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path)
    assert "torch.addmm" in str(refused.value)
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path, torch_compute_allowed=True)
    assert seeds.library_calls(source) == ["torch.addmm"]
    with make_evaluator(problem="matmul_bias_relu", policy="kernelbench", size_preset="test", sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok" and "uses-torch-compute" in result.label, (result.status, result.reason)


def test_nn_sequential_parameters_and_buffers_are_bound_by_their_qualified_names(tmp_path, sandbox):
    spec = resolve_problem(str(PROBLEMS / "sequential_norms.py"))
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path)
    assert "self.get_parameter('block.0.weight')" in source and "self.get_buffer('block.1.scale')" in source
    with make_evaluator(problem=spec.path, sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason


def test_a_helper_the_module_builds_for_its_submodules_is_kept_and_a_statement_of_sizes_is_not(tmp_path, sandbox):
    # level3/29-30 (the Swins) on 4 x H200: every evaluation "constructing ModelNew failed: NameError: name
    # 'to_2tuple' is not defined"; the seed kept the definitions but not the assignment building the helper
    spec = resolve_problem(str(PROBLEMS / "module_helpers.py"))
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path)
    assert "\nto_2tuple = _ntuple(2)\n" in source and "input_shape" not in source and "batch_size" not in source
    with make_evaluator(problem=spec.path, sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason


def test_a_tensor_attribute_forward_assigns_is_bound_and_not_returned_and_forward_keeps_its_defaults(tmp_path, sandbox):
    # level3/33_VanillaRNN: Inductor's graph takes self.hidden (no parameter, buffer or input: the capture refused it)
    # and returns its new value after forward's output, which Dynamo sets on the module; level3/47_NetVlad and
    # 48_Mamba2 on 2 x H200: every evaluation "ModelNew.forward() missing 1 required positional argument: 'mask'"
    spec = resolve_problem(str(PROBLEMS / "stateful_attribute.py"))
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path)
    (entry,) = (tmp_path / "inductor-seeds").glob("stateful_attribute-*.json")  # the capture, as cached
    captured = json.loads(entry.read_text())
    assert {"kind": "attribute", "name": "hidden"} in captured["args"] and captured["outputs"] == 1
    assert len(captured["code"].split("return (")[-1].split(")")[0].rstrip(", ").split(",")) == 2  # output, hidden
    assert "self.hidden.to(" in source
    assert "def forward(self, x, initial_hidden, mask=None):" in source  # annotations left out: they may name typing
    with make_evaluator(problem=spec.path, sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason


def test_level3_mlps_sequential_of_linear_layers_converts_and_its_library_calls_are_named(tmp_path, sandbox):
    spec = resolve_problem(str(PROBLEMS / "sequential_mlp.py"))  # level3/1_MLP at interpreter sizes
    with pytest.raises(SeedError, match=r"calls library kernels \(torch.addmm\)"):
        seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path)
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path, torch_compute_allowed=True)
    assert "self.get_parameter('network.4.weight')" in source
    with make_evaluator(problem=spec.path, policy="kernelbench", sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok" and "uses-torch-compute" in result.label, (result.status, result.reason)


@pytest.mark.slow
def test_a_forward_that_warns_is_captured_in_one_graph():
    # level2/28: nn.InstanceNorm2d warns on each call there, and the warning broke the capture's one graph
    captured = seeds.capture(resolve_problem(str(PROBLEMS / "warns_in_forward.py")), "cpu")
    assert captured["kernels"] and "def call(" in captured["code"]


def test_a_converter_failure_is_a_seed_error_with_its_reason_not_a_traceback():
    captured = json.loads((FIXTURES / "layernorm.json").read_text())
    spec = resolve_problem(captured["fixture"]["problem"], sizes=captured["fixture"]["sizes"])
    captured["args"] = [{"kind": "param"} for _ in captured["args"]]  # a parameter without its name
    with pytest.raises(SeedError, match=r"the converter failed on Inductor's code for layernorm \(KeyError: 'name'\)"):
        convert(captured, open(spec.path).read(), spec.name)


ND_TILING = {"nd_tiling": {"triton": {"prefer_nd_tiling": True, "tile_reductions": True}}}


@pytest.mark.slow
def test_each_inductor_variant_is_cached_on_its_own_and_one_inductor_cannot_build_is_a_note(tmp_path, monkeypatch,
                                                                                              capsys, sandbox):
    spec = resolve_problem("sum_reduction", size_preset="test")
    asked, real = [], seeds.capture_variants

    def recording(spec, device, templates, tf32, variants, **kwargs):
        asked.append(sorted(variants))
        return real(spec, device, templates, tf32, variants, **kwargs)

    monkeypatch.setattr(seeds, "capture_variants", recording)
    first = seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", tmp_path, variants=ND_TILING)
    assert list(first) == ["inductor", "inductor:nd_tiling"] and first["inductor"] != first["inductor:nd_tiling"]
    assert first["inductor"] == seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path)  # the same cache
    broken = {"broken": {"triton": {"no_such_option": True}}}
    second = seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", tmp_path, variants={**ND_TILING, **broken})
    assert second == first and asked == [["default", "nd_tiling"], ["broken"]]  # only the new variant compiled
    assert "no seed from Inductor's variant 'broken'" in capsys.readouterr().out

    def crash(*args, **kwargs):
        raise SeedError("torch.compile of sum_reduction failed, so there is no Inductor seed:\nSegmentation fault")

    monkeypatch.setattr(seeds, "capture_variants", crash)  # a variant that kills the capture process
    more = {**ND_TILING, "new": {"split_reductions": False}}
    third = seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", tmp_path, variants=more)
    assert third == first and "no seed from Inductor's variant 'new'" in capsys.readouterr().out
    with pytest.raises(SeedError, match="may not be called 'default'"):
        seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", tmp_path, variants={"default": {}})
    with make_evaluator(problem="sum_reduction", size_preset="test", sandbox=sandbox) as ev:
        result = ev.evaluate(first["inductor:nd_tiling"], label="inductor:nd_tiling")
    assert result.status == "ok", result.reason


@pytest.mark.slow
def test_inductor_variants_that_write_other_kernels_join_generation_0_after_the_seed(tmp_path):
    proc = kernelevo("run", "problem=sum_reduction", "problem.seed=inductor", *TINY, "search.generations=0",
                     "search.tuner.trials=1",  # each seed as captured: a drawn tile of 1 x 1 blocks took the
                     cwd=tmp_path)  # interpreter past the 120 s timeout; generation 0 is what this asserts
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = run_dir_of(proc.stdout)
    first = read_store(run_dir, lambda store: {i.id: (i.operator, i.result.status) for i in store.individuals()
                                               if i.generation == 0})
    # conf/inductor/variants.yaml: on the interpreter one of its four variants changes sum_reduction's kernel (issue
    # 43: captured with dynamic shapes, looped_reductions writes the default's kernel, which loops over a reduction of
    # unknown length anyway)
    assert first == {"0.0": ("inductor", "ok"), "0.1": ("inductor:nd_tiling", "ok")}
    written = {p.name: p.read_text() for p in run_dir.glob("seed_inductor*.py")}
    assert sorted(written) == ["seed_inductor.py", "seed_inductor_nd_tiling.py"]
    assert len(set(written.values())) == 2
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["seed"] == "inductor"  # speed-ups over the seed are over Inductor's default kernels
    assert summary["best_from"] and set(summary["best_from"].split("+")) <= {op for op, _ in first.values()}


def test_only_sizes_that_other_sizes_change_make_a_dynamic_capture_specialised(tmp_path):
    problem_file = tmp_path / "conv_like.py"
    problem_file.write_text((PROBLEMS / "sequential_norms.py").read_text() + "\nkernel_size = 3\nin_channels = 3\n"
                            "features = 32\n")
    problem = load_problem(resolve_problem(str(problem_file), sizes={"dim": 12}))
    # dim: set for this run; batch_size 16 and features 32: at least MIN_SHRINKABLE; not the 3s, which never change
    assert importlib.import_module("kernelevo.seeds.inductor.capture")._varying_sizes(problem) == {12, 16, 32}


def test_a_variant_asking_for_max_autotune_is_left_out_off_a_gpu_with_a_line_saying_so(capsys):
    variants = {"nd_tiling": ND_TILING["nd_tiling"], "max_autotune": {"max_autotune": True},
                "pointwise": {"max_autotune_pointwise": False}}
    assert seeds.gpu_variants(variants, "cuda") == variants
    assert seeds.gpu_variants(variants, "cpu") == {k: v for k, v in variants.items() if k != "max_autotune"}
    assert "variant 'max_autotune' (max_autotune) needs a GPU: no seed from it on cpu" in capsys.readouterr().out


def test_the_max_autotune_variant_compiles_with_the_max_autotune_baselines_options():
    # on 4 x H200 level1/53 and level1/91 ended at 0.92x and 0.86x of max-autotune with the variant's seed judged:
    # the variant lacked the coordinate descent that mode max-autotune-no-cudagraphs also turns on
    variants = OmegaConf.to_container(OmegaConf.load(REPO / "conf/inductor/variants.yaml"))
    mode = torch._inductor.list_mode_options(COMPILED["max_autotune"]["mode"])
    assert flat_options(variants["variants"]["max_autotune"]) == mode
    assert seeds.autotuned(variants["variants"]["max_autotune"]) == ["max_autotune"]


def test_a_library_call_left_after_inductors_triton_templates_were_tried_says_so():
    captured = json.loads((FIXTURES / "layernorm.json").read_text())
    spec = resolve_problem(captured["fixture"]["problem"], sizes=captured["fixture"]["sizes"])
    captured["code"] = captured["code"].replace("        return (", "        extern_kernels.convolution(buf0)\n"
                                                "        return (", 1)  # as if a convolution were left
    captured["fell_back"] = ["static shapes, convolutions as Triton templates: NoValidChoicesError: no choices"]
    with pytest.raises(SeedError, match=r"calls library kernels \(torch.convolution\) for which it has no Triton "
                                        r"form here \(its Triton templates were tried: static shapes, convolutions as "
                                        r"Triton templates: NoValidChoicesError"):
        seeds._checked_source(spec, captured, torch_compute_allowed=False)


def test_gemm_templates_leave_inductor_no_split_k_choice_that_calls_the_library():
    # level1/4 (matrix-vector, K = 1,048,576) and level1/6 (K = 524,288) on an H200: with matmuls as Triton templates
    # Inductor still autotuned "decompose_k", whose batched matmul stays a library call (torch.bmm_dtype), and the seed
    # failed; the capture's options for templates switch it off, and each option exists in this torch
    import torch._inductor.config as inductor_config

    capture = importlib.import_module("kernelevo.seeds.inductor.capture")
    saved, cudnn_tf32 = inductor_config.save_config(), torch.backends.cudnn.allow_tf32
    try:
        capture._prepare("cuda", templates=True, tf32=False)  # as on a GPU under policy triton (nothing compiled)
        for key, value in TEMPLATE_OPTIONS.items():
            *path, name = key.split(".")
            owner = functools.reduce(getattr, path, inductor_config)
            assert hasattr(owner, name), f"torch {torch.__version__} has no Inductor option {key}"
            assert getattr(owner, name) == value
        assert inductor_config.triton.num_decompose_k_splits == 0
    finally:
        inductor_config.load_config(saved)
        torch.backends.cudnn.allow_tf32 = cudnn_tf32
    assert inductor_config.triton.num_decompose_k_splits > 0  # Inductor's own default offers it


def test_a_networks_default_capture_takes_each_templates_first_configuration_unbenchmarked():
    # on an H200 the default captures of SqueezeNet (26 convolutions), EfficientNetB1 and SwinMLP took 443, 332 and
    # 353 s, autotuning every GEMM and convolution template; past inductor.autotune_templates_up_to the default takes
    # one configuration per template (Inductor benchmarks nothing when it has one choice)
    import torch._inductor.config as inductor_config
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3))
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.convs(x).mean((2, 3))) @ torch.ones(2, 2)

    graphs = []
    torch.compile(Net(), backend=lambda gm, example: graphs.append(gm) or gm.forward, fullgraph=True)(
        torch.randn(1, 3, 8, 8))
    assert template_calls(graphs[0]) == 4  # two convolutions, the Linear, the matmul; not the ReLU or the mean
    assert template_shapes(graphs[0]) == 4  # each one distinct
    assert template_choices(graphs[0], 4) == {} and template_choices(graphs[0], None) == {}
    assert template_choices(graphs[0], 3) == {"test_configs.max_mm_configs": 1}
    wanted = {**template_choices(graphs[0], 3), "triton.no_such_option": 1}  # one an older torch lacks is dropped
    assert present(wanted, inductor_config) == {"test_configs.max_mm_configs": 1}
    with inductor_config.patch(present(wanted, inductor_config)):
        assert inductor_config.test_configs.max_mm_configs == 1
    assert inductor_config.test_configs.max_mm_configs is None


def test_an_unrolled_loops_repeated_matmuls_count_once_each_so_its_default_capture_autotunes_them():
    # level3/34 on an H200: Dynamo unrolled a 256-step RNN into 512 Linears of 2 shapes; counted one by one they
    # were past the limit, so the seed took each template's first configuration and ran at 0.46x of max-autotune,
    # though Inductor benchmarks each distinct call once and reads the others' timings from its autotuning cache
    from torch import nn

    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.i2h, self.h2o = nn.Linear(6, 4), nn.Linear(4, 3)

        def forward(self, x, h):
            outputs = []
            for t in range(x.shape[0]):
                h = torch.tanh(self.i2h(torch.cat((x[t], h), dim=1)))
                outputs.append(self.h2o(h))
            return torch.stack(outputs)

    graphs = []
    torch.compile(Loop(), backend=lambda gm, example: graphs.append(gm) or gm.forward, fullgraph=True)(
        torch.randn(20, 2, 2), torch.randn(2, 4))
    assert template_calls(graphs[0]) == 40 and template_shapes(graphs[0]) == 2
    assert template_choices(graphs[0], 12) == {} and template_choices(graphs[0], 1) == {"test_configs.max_mm_configs": 1}


def test_a_capture_not_kept_says_why_and_how_long_it_took(monkeypatch):
    # a network's default capture took 332-457 s on an H200 and the bench's log did not say in which attempt
    capture = importlib.import_module("kernelevo.seeds.inductor.capture")
    attempts = []

    def capture_one(model, inputs, device, dynamic=False, gpu_lock=None, autotune_up_to=None, decompositions=None):
        attempts.append(dynamic)
        if dynamic:
            raise RuntimeError("a size Dynamo cannot keep symbolic\nmore lines")
        return {"code": "static", "dynamic": False}

    monkeypatch.setattr(capture, "_capture_one", capture_one)
    spec = resolve_problem("rmsnorm")
    got = capture._first_that_converts(torch.nn.Identity(), [], "cpu", spec, dynamic=True)
    assert attempts == [True, False] and got["code"] == "static"
    assert len(got["fell_back"]) == 1
    assert re.fullmatch(r"dynamic shapes: RuntimeError: a size Dynamo cannot keep symbolic \(\d+ s\)",
                        got["fell_back"][0])


def test_sizes_inductors_code_asserts_as_literals_count_as_specialised():
    # level2/18: Dynamo's graph had the Linear's sizes symbolic; Inductor's guards specialised them while compiling
    code = ("class Runner:\n    def call(self, args):\n        arg0_1, arg1_1, arg2_1 = args\n"
            "        assert_size_stride(arg0_1, (128, 64), (64, 1), 'input')\n"
            "        assert_size_stride(arg2_1, (s77, 1), (1, 1), 'input')\n")
    mapping = [{"kind": "param", "name": "linear.weight"}, {"kind": "size", "of": 2, "dim": 0},
               {"kind": "input", "index": 0}]
    specialised = importlib.import_module("kernelevo.seeds.inductor.capture")._specialised
    assert specialised(code, mapping, ["input 0 dim 1 = 8"]) == ["input 0 dim 1 = 8", "linear.weight dim 0 = 128",
                                                                 "linear.weight dim 1 = 64"]
