"""Role-specific context built to a token budget from named, switchable parts; hardware limits before compiling."""
from conftest import SCALE_SHIFT, candidate
from fitness.genome import Genome
from hardware_profiles.limits import limit_violation
from hardware_profiles import load_profile
from operators.llm.context import ContextBuilder, ContextSettings

PROBLEM = open(SCALE_SHIFT).read()
PARENT = Genome.from_source(candidate("good"))


def builder(**settings) -> ContextBuilder:
    return ContextBuilder(ContextSettings(**settings), load_profile("h100_sxm"), PROBLEM)


def test_each_role_gets_its_own_parts():
    planner = builder().build("planner", PARENT, lineage_notes=["param_mutation: BLOCK 256 -> incorrect"])
    coder = builder().build("coder", PARENT)
    debugger = builder().build("debugger")
    assert "## Hardware" in planner and "## Already tried from this lineage" in planner
    assert "## Parent kernel (numbered)" in coder and "   7| BLOCK = 128" in coder
    assert "## Already tried" not in coder and "## Parent kernel" not in debugger
    assert "NVIDIA H100 SXM5 80GB: 132 SMs" in planner


def test_parts_can_be_switched_off():
    text = builder(parts={"hardware": False}).build("planner", PARENT)
    assert "## Hardware" not in text and "## Parent kernel" in text


def test_the_token_budget_drops_the_lowest_priority_parts_first():
    full = builder().build("planner", PARENT)
    small = builder(token_budget=len(full) // 4 - 50).build("planner", PARENT)
    assert "## PyTorch reference" in small and "## Hardware" not in small
    assert len(small) <= (len(full) // 4 - 50) * 4


def test_launch_configurations_beyond_the_profile_are_found_before_compiling():
    h100 = load_profile("h100_sxm")
    assert limit_violation({"NUM_WARPS": 64}, h100).startswith("NUM_WARPS=64 needs 2048 threads")
    assert "shared memory" in limit_violation({"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "NUM_STAGES": 4}, h100)
    assert limit_violation({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "NUM_STAGES": 3, "NUM_WARPS": 8}, h100) == ""


def test_times_and_figures_in_prompts_are_plain_numbers():
    from operators.llm.context import fmt_time, two_digits

    assert fmt_time(0.1234) == "123 ms" and fmt_time(12.5e-6) == "12 us" and fmt_time(0.0042) == "4.2 ms"
    assert two_digits(410.3) == "410" and two_digits(9.23) == "9.2" and "e+" not in fmt_time(123.0)
