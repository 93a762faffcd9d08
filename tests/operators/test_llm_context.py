"""Role-specific context built to a token budget from named, switchable parts: the target GPU and the problem at
full size with its cost model, measured figures labelled with where they were measured, the parent once and the
rest told against it; hardware limits before compiling."""
from dataclasses import replace

from conftest import candidate
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from llm_fakes import PARENT, PARENT_GENOME, PROBLEM, builder, target
from llm_fakes import interpreted as ind
from kernelevo.core.evaluation_record import EvalResult
from hardware_profiles import load_profile
from hardware_profiles.limits import limit_violation
from operators.llm.context import ContextBuilder, ContextSettings
from operators.llm.history import change_summary, plan_summary

GOOD = candidate("good")


def test_each_role_gets_its_own_parts():
    planner = builder().build("planner", PARENT).text
    coder = builder().build("coder", PARENT).text
    debugger = builder().build("debugger").text
    assert "## Target GPU" in planner and "## Problem at full size" in planner
    assert "## Parent kernel 1.0 (numbered)" in planner and "   7| BLOCK = 128" in planner
    assert "## Parent kernel 1.0 (numbered)" in coder and "   7| BLOCK = 128" in coder  # the lines the plan names
    assert "they are not part of the code" in coder
    assert "## Already tried" not in coder and "## Parent kernel" not in debugger
    assert "NVIDIA H100 SXM5 80GB (hardware profile h100_sxm): 132 SMs" in planner


def test_prompts_describe_the_target_gpu_and_the_full_size_cost_model_not_the_test_sizes():
    gemm = target("matmul", size_preset="test")  # judged at M=97, K=45, N=83 on the interpreter
    assert gemm.sizes == {"M": 4096, "K": 4096, "N": 4096} and gemm.evaluated_sizes == {"M": 97, "K": 45, "N": 83}
    assert round(gemm.intensity) == 683 and gemm.bound == "compute" and round(gemm.ridge) == 148
    text = ContextBuilder(ContextSettings(), gemm, PROBLEM).build("initialiser").text
    assert "Sizes: M=4096, K=4096, N=4096." in text and "A: float32[4096, 4096]" in text
    assert "137 GFLOP" in text and "arithmetic intensity 683 FLOP/byte" in text
    assert "compute bound as the reference computes it (its ridge point is 148 FLOP/byte at the tf32 peak)" in text
    assert "reference algorithm's roofline is 278 us" in text and "at small test sizes (M=97, K=45, N=83)" in text
    assert "the data floor is 60 us" in text and "all of which the output depends on" in text  # A, B and C: 201 MB
    assert "exact rewrite of the reference's algebra" in text and "floating-point reassociation" in text
    unnamed = ContextBuilder(ContextSettings(), target(profile="cpu_interpreter"), PROBLEM).build("planner", PARENT)
    assert "No target GPU was named" in unnamed.text and "Triton CPU interpreter: 1 SMs" not in unnamed.text
    without = ContextBuilder(ContextSettings(parts={"hardware": False}), gemm, PROBLEM).build("planner", PARENT).text
    assert "## Target GPU" not in without and "arithmetic intensity 683" in without and "ridge" not in without


def test_measured_figures_say_where_they_were_measured():
    text = builder().build("planner", PARENT).text  # issue 66: no interpreter time is quoted as a speed
    assert "correct on the CPU interpreter at test sizes (batch_size=4, dim=4000); no GPU time was measured" in text
    assert "12 ms" not in text
    on_gpu = Individual("2.0", PARENT_GENOME, result=EvalResult(
        status="ok", time_s=95e-6, eager_s=142e-6, compile_s=92e-6, max_autotune_s=76e-6, sol_s=80e-6,
        sol_fraction=0.84, timer="cuda-events", device="cuda:0", hardware_profile="h100_sxm"))
    text = builder().build("planner", on_gpu).text
    assert "95 us (CUDA events on h100_sxm at full size); PyTorch eager 142 us (1.49x faster)" in text
    assert ("torch.compile 92 us (1.03x slower), torch.compile max-autotune 76 us (1.25x slower); 84% of the "
            "reference algorithm's roofline (80 us;") in text


def test_the_parent_appears_once_and_other_kernels_as_changes_against_it():
    tuned = ind("1.1", PARENT_GENOME.with_params({"BLOCK": 256}), 0.010, parents=("0.0",))
    tuned_slower = ind("1.2", PARENT_GENOME.with_params({"BLOCK": 64}), 0.011, parents=("0.0",))
    rewritten = Genome.from_source(GOOD.replace("x * scale + 1.0", "x * scale + 1.0 + 0.0 * x"))
    other = ind("2.0", rewritten, 0.009, parents=("1.0",), note="1. add a no-op")
    interpreted = builder(top_k=3).build("planner", PARENT, (PARENT, tuned, tuned_slower, other)).text
    listed = interpreted.split("## Other correct kernels so far (newest first: off a GPU no time ranks them; "
                               "against the parent)\n")[1]
    assert listed.index("- 2.0 ") < listed.index("- 1.2 ") and "- 1.1 " not in listed  # newest first, no time
    assert "- 1.2 (llm_mutation): correct; the parent's code with BLOCK 128 -> 64" in listed and " ms" not in listed
    archive = tuple(replace(i, result=replace(i.result, timer="cuda-events", device="cuda:0"))
                    for i in (PARENT, tuned, tuned_slower, other))
    text = builder(top_k=3).build("planner", archive[0], archive).text
    assert text.count("def scale_shift_kernel") == 1  # the parent only: no best kernel repeats it
    assert '- 2.0 (llm_mutation): 9 ms, 1.33x faster than the parent; idea: "add a no-op"; +1 -1 lines in ' \
        'scale_shift_kernel' in text
    assert "```diff\n--- parent\n+++ 2.0" in text and "+    tl.store(y_ptr + offs, x * scale + 1.0 + 0.0 * x" in text
    assert "- 1.1 (llm_mutation): 10 ms, 1.20x faster than the parent; the parent's code with BLOCK 128 -> 256" in text
    assert "1.2 (llm_mutation): 11 ms" not in text  # same code as 1.1, slower: one entry per code
    assert change_summary(PARENT_GENOME, rewritten) == "+1 -1 lines in scale_shift_kernel"


def test_already_tried_gives_each_attempt_its_plan_outcome_time_and_change():
    plan = "## Plan\n1. [constant BLOCK, line 7] raise BLOCK to 1024: fewer programs.\n2. keep the rest."
    tried = ind("2.0", PARENT_GENOME.with_params({"BLOCK": 256}), 0.006, parents=("1.0",), note=plan)
    failed = ind("2.1", PARENT_GENOME.with_params({"BLOCK": 64}), None, status="incorrect", parents=("1.0",),
                 operator="param_mutation", reason="trial 0: max abs err 3.1\nmore")
    text = builder().build("planner", PARENT, (PARENT, tried, failed), duplicates=("1. use BLOCK 4096",)).text
    section = text.split("## Already tried from this lineage")[1].split("\n## ")[0]
    assert "(times:" not in section and " ms" not in section  # issue 66: no interpreter time quoted
    assert ('- 2.0 (llm_mutation of 1.0): "[constant BLOCK, line 7] raise BLOCK to 1024: fewer programs.; keep the '
            'rest." -> ok; change: BLOCK 128 -> 256') in section
    assert "- 2.1 (param_mutation of 1.0) -> incorrect (trial 0: max abs err 3.1); change: BLOCK 128 -> 64" in section
    assert '"use BLOCK 4096" -> made a kernel that already exists; propose a different change' in section
    assert "## Recent failures" not in text  # 2.1 is told once, as an attempt
    assert plan_summary("x" * 500).endswith("...") and len(plan_summary("x" * 500)) == 240


def test_prompt_sizes_are_counted_per_part():
    context = builder().build("planner", PARENT)
    assert set(context.parts) >= {"problem", "hardware", "cost_model", "parent", "profiling"}
    assert sum(context.parts.values()) + 2 * (len(context.parts) - 1) == len(context.text)


def test_parts_can_be_switched_off():
    text = builder(parts={"hardware": False}).build("planner", PARENT).text
    assert "## Target GPU" not in text and "## Parent kernel" in text


def test_the_token_budget_drops_the_lowest_priority_parts_first():
    full = builder().build("planner", PARENT).text
    small = builder(token_budget=len(full) // 4 - 50).build("planner", PARENT).text
    assert "## PyTorch reference" in small and "## Measured" not in small
    assert len(small) <= (len(full) // 4 - 50) * 4


def test_launch_configurations_beyond_the_profile_are_found_before_compiling():
    h100 = load_profile("h100_sxm")
    assert limit_violation({"NUM_WARPS": 64}, h100).startswith("NUM_WARPS=64 needs 2048 threads")
    assert "shared memory" in limit_violation({"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "NUM_STAGES": 4}, h100)
    assert limit_violation({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "NUM_STAGES": 3, "NUM_WARPS": 8}, h100) == ""


def test_times_and_figures_in_prompts_are_plain_numbers():
    from operators.llm.figures import fmt_time, two_digits

    assert fmt_time(0.1234) == "123 ms" and fmt_time(12.5e-6) == "12 us" and fmt_time(0.0042) == "4.2 ms"
    assert two_digits(410.3) == "410" and two_digits(9.23) == "9.2" and "e+" not in fmt_time(123.0)
    assert two_digits(1.2e-5) == "0.000012" and "e" not in fmt_time(3e-9)
