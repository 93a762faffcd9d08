"""Issue 30: what the agents are told is true, once, and nothing they should not act on -- each point checked on the
prompts the team sends through litellm's real HTTP client to the scripted OpenAI-compatible server (replies by
role; no model anywhere). The operators are called in-process on hand-made individuals judged on the interpreter at
test sizes (dim=4000) other than the full sizes (dim=100); the seed run of point 9 is in test_llm_agents."""
import random
import re
from dataclasses import replace

from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from kernelevo.core.evaluation_record import EvalResult
from fakes import FakeEvaluator, FakeService
from hardware_profiles import load_profile
from llm_fakes import GOOD, IDEA, PARENT_GENOME, PLAN, ind, live_team, mutate
from llm_fakes import server  # noqa: F401 (the fixture)
from operators.base import Duplicate, OperatorContext
from operators.llm.history import code_change
from operators.llm.ledger import ResponseCache
from operators.llm.operators import LLMCrossover
from operators.llm.parsing import extract_code

REWRITE = GOOD.replace("x * scale + 1.0", "x * scale + 1.0 + 0.0 * x")  # another code structure
GPU = {"timer": "cuda-events", "device": "cuda:0", "sizes": {}, "hardware_profile": "h100_sxm"}


def prompts(server, role: str) -> list[str]:
    return [body["messages"][1]["content"] for _, _, body in server.requests
            if f"Your role: {role}." in body["messages"][0]["content"]]


def test_1_kernels_baked_at_test_sizes_are_marked_and_not_handed_to_the_planner(server, tmp_path):
    team = live_team(server, tmp_path)
    captured = ind("0.0", PARENT_GENOME, 0.02, operator="inductor")
    retuned = ind("1.0", PARENT_GENOME.with_params({"BLOCK": 64}), 0.01, "param_mutation", ("0.0",))
    assert mutate(team, retuned, [captured, retuned]) and len(prompts(server, "planner")) == 1  # nothing else known
    planner = prompts(server, "planner")[0]
    assert "converted from torch.compile's capture at the test sizes (batch_size=4, dim=4000)" in planner
    assert "must read its sizes and strides from its inputs" in planner
    assert "- 0.0 (inductor) [converted from torch.compile at the test sizes" in planner  # best kernels: marked
    written = ind("1.1", Genome.from_source(REWRITE), 0.03, parents=("0.0",), note=PLAN)
    assert mutate(team, retuned, [captured, retuned, written]) == []  # a kernel that runs at full size exists
    assert len(server.requests) == 2  # no request for the baked parent
    mutate(team, written, [captured, retuned, written])
    assert "converted from torch.compile's capture" not in prompts(server, "planner")[-1].split("## Best")[0]


def test_2_no_ratio_of_interpreter_times_anywhere(server, tmp_path):
    team = live_team(server, tmp_path)
    parent = ind("1.0", PARENT_GENOME, 0.848, parents=("0.0",), note=PLAN)
    archive = [ind("0.0", PARENT_GENOME.with_params({"BLOCK": 64}), 0.139, "seed"), parent,
               ind("2.1", Genome.from_source(REWRITE), 0.414, parents=("1.0",), note=PLAN)]
    mutate(team, parent, archive)
    planner = prompts(server, "planner")[0]
    assert not re.search(r"\d+(\.\d+)?x (faster|slower)|as fast| vs \d", planner), planner
    assert "848 ms" not in planner and "no speed-ups or ratios are given" in planner  # issue 66: no time quoted
    assert "correct on the CPU interpreter at test sizes" in planner
    on_gpu = [replace(i, result=replace(i.result, **GPU)) for i in archive]
    mutate(team, on_gpu[1], on_gpu, child="2.2")
    assert "2.05x faster than the parent" in prompts(server, "planner")[-1]  # GPU times: compared


def test_4_change_summaries_count_diffs_show_the_kernel_body_and_plans_are_told_by_their_idea(server, tmp_path):
    team = live_team(server, tmp_path)
    body = "\n".join(f"    v{i} = x * {i}.0" for i in range(90))  # a long rewrite of the kernel
    long = REWRITE.replace("    tl.store(", f"{body}\n    tl.store(")
    summary = code_change(GOOD, long)
    assert summary.count("scale_shift_kernel") == 1 and re.match(r"\+91 -1 lines in scale_shift_kernel$", summary)
    parent = ind("1.0", PARENT_GENOME, 0.02, parents=("0.0",), note=PLAN)
    best = ind("1.1", Genome.from_source(long), 0.01, parents=("0.0",), note=PLAN)
    mutate(team, parent, [ind("0.0", PARENT_GENOME, 0.03, "seed"), parent, best])
    planner = prompts(server, "planner")[0]
    assert "[... " not in planner and "its changed code in full" in planner and "    v89 = x * 89.0" in planner
    assert "# scale_shift_kernel, lines" in planner  # the kernel body, whole
    assert f'- 1.1 (llm_mutation of 0.0): "{IDEA}" -> ok' in planner  # the planner's own one-line idea
    assert "Idea: <the change, in at most 20 words>" in planner


def test_5_siblings_get_distinct_prompts_and_never_a_siblings_cached_reply(server, tmp_path):
    team = live_team(server, tmp_path)
    parent = ind("1.0", PARENT_GENOME, 0.02, parents=("0.0",), note=PLAN)
    archive = [ind("0.0", PARENT_GENOME, 0.03, "seed"), parent]
    for rank, child in enumerate(("2.0", "2.1"), start=1):
        mutate(team, parent, archive, child=child, rank=rank)
    first, second = prompts(server, "planner")
    assert first != second and "Yours is 1: plan the change with the largest expected gain" in first
    assert "Yours is 2: plan the change you rank 2nd" in second
    assert len(server.requests) == 4  # two plans and two kernels, each asked: no reply served from a sibling's
    assert len(ResponseCache(tmp_path / "cache")) == 4
    mutate(live_team(server, tmp_path), parent, archive, child="2.1", rank=2)  # a rerun of one child replays its own
    assert len(server.requests) == 4


def test_5b_sixteen_siblings_of_one_parent_get_sixteen_distinct_planner_prompts(server, tmp_path):
    """Issue 42: with up to 16 children in flight from one parent and one context, no two planner prompts of a
    generation are byte-identical (the old rank, slot % 3, gave children 2.0, 2.3, 2.6 the same prompt)."""
    team = live_team(server, tmp_path)
    parent = ind("1.0", PARENT_GENOME, 0.02, parents=("0.0",), note=PLAN)
    archive = [ind("0.0", PARENT_GENOME, 0.03, "seed"), parent]
    for slot in range(16):
        mutate(team, parent, archive, child=f"2.{slot}", rank=slot + 1)
    planners = [body["messages"] for _, _, body in server.requests
                if "Your role: planner." in body["messages"][0]["content"]]
    assert len(planners) == 16 and len({repr(messages) for messages in planners}) == 16
    assert "Yours is 16: plan the change you rank 16th" in planners[15][1]["content"]
    assert "first list your 16 best ideas under `## Ideas`" in planners[15][1]["content"]


def test_6_notes_are_told_to_the_operator_that_caused_them(server, tmp_path):
    team = live_team(server, tmp_path)
    a = ind("1.0", PARENT_GENOME, 0.02, parents=("0.0",), note=PLAN)
    b = ind("1.1", Genome.from_source(REWRITE), 0.03, parents=("0.0",), note=PLAN)
    others = (Duplicate("llm_mutation", "## Plan\nIdea: fuse the two loads"), Duplicate("param_mutation", ""))
    context = OperatorContext(generation=2, team=team, archive=(a, b), duplicates=others)
    LLMCrossover()([a, b], random.Random(0), context)
    assert "repeated a kernel" not in prompts(server, "crossover")[0]  # the mutation's duplicate is not its own
    mutate(team, a, [a, b], duplicates=(Duplicate("param_mutation", ""),))
    assert "this request before" not in prompts(server, "planner")[0]  # nor an offline operator's
    mutate(team, a, [a, b], child="2.1", duplicates=others)
    assert '"fuse the two loads" -> made a kernel that already exists' in prompts(server, "planner")[1]
    LLMCrossover()([a, b], random.Random(0), replace(context, duplicates=(Duplicate("llm_crossover", "crossover"),)))
    assert "Your earlier reply for this child repeated a kernel" in prompts(server, "crossover")[1]


def test_7_earlier_designs_stay_in_the_context_once_each_with_their_best_time(server, tmp_path):
    team = live_team(server, tmp_path, top_k=0)  # no best kernels: every other design is told here
    seed = ind("0.0", PARENT_GENOME, 0.05, "seed")
    elsewhere = [ind("1.1", Genome.from_source(REWRITE), 0.04, parents=("0.0",), note=PLAN),
                 ind("2.3", Genome.from_source(REWRITE).with_params({"BLOCK": 64}), 0.03, "param_mutation", ("1.1",)),
                 ind("2.4", Genome.from_source(GOOD.replace("1.0", "2.0 - 1.0")), 0.045, parents=("0.0",),
                     note="## Plan\nIdea: subtract instead\n1. x")]
    parent = ind("3.0", Genome.from_source(GOOD.replace("mask=mask)", "mask=mask, other=0.0)")), 0.02,
                 parents=("2.9",))  # of another lineage: none of the designs is an attempt from it
    mutate(team, parent, [seed, *elsewhere, parent], child="4.0")
    designs = prompts(server, "planner")[0].split("## Other designs so far")[1].split("\n## ")[0]
    assert designs.count("\n- ") == 3 and "- 1.1 " not in designs, designs  # 1.1 and 2.3: one structure, told once
    assert designs.startswith(" (each code structure once, by its newest correct kernel)\n- 2.4 ")  # no time ranks
    assert f'- 2.3 (param_mutation of 1.1): "{IDEA}" -> correct over 2 kernels of this code' in designs
    timed = [replace(i, result=replace(i.result, **GPU)) for i in (seed, *elsewhere, parent)]
    mutate(team, timed[-1], timed, child="4.1")
    designs = prompts(server, "planner")[1].split("## Other designs so far")[1].split("\n## ")[0]
    assert f'- 2.3 (param_mutation of 1.1): "{IDEA}" -> best 30 ms over 2 kernels of this code' in designs
    assert '- 2.4 (llm_mutation of 0.0): "subtract instead" -> best 45 ms' in designs and "- 0.0 (seed)" in designs


def test_8_missing_facts_residency_synchronisation_test_shapes_and_a_numbered_coder_listing(server, tmp_path):
    team = live_team(server, tmp_path)
    parent = ind("1.0", PARENT_GENOME, 0.02, parents=("0.0",), note=PLAN)
    mutate(team, parent, [parent])
    planner, coder = prompts(server, "planner")[0], prompts(server, "coder")[0]
    system = server.requests[0][2]["messages"][0]["content"]
    assert "per SM at most 2048 threads (64 warps) and 32 blocks resident at once" in planner
    assert "atomics" in system and "must never wait for one\n  another (spin-waits" in system
    assert "paths that only the full sizes take (more blocks or programs along a dimension" in planner
    assert "   7| BLOCK = 128" in coder and "[constant BLOCK, line 7]" in coder
    numbered = "\n".join(f"{n:>4}| {line}".rstrip() for n, line in enumerate(GOOD.splitlines(), 1))
    assert extract_code(f"```python\n{numbered}\n```") == GOOD  # a reply copied with the numbers still parses


def by_block(source: str) -> EvalResult:
    """Times a kernel by its BLOCK (larger is faster)."""
    return EvalResult(status="ok", time_s=1.0 / Genome.from_source(source).params["BLOCK"])


def measured(on_gpu: bool) -> FakeService:
    """An evaluation service that times a kernel by its BLOCK, on a GPU or the interpreter."""
    return FakeService(by_block, load_profile("h100_sxm"), evaluators=[FakeEvaluator(on_gpu=on_gpu)])


def test_3_llm_written_launch_settings_are_kept_without_a_gpu(server, tmp_path):
    from evo.tuning.tuner import Tuner

    parent = ind("1.0", PARENT_GENOME.with_params({"BLOCK": 64}), 0.02, parents=("0.0",), note=PLAN)
    (genome,) = mutate(live_team(server, tmp_path), parent, [parent])  # the coder wrote BLOCK = 256
    written = Individual("2.0", genome, ("1.0",), "llm_mutation", 2)
    assert written.genome.params == {"BLOCK": 256} and written.genome.space == {"BLOCK": [64, 128, 256]}
    interpreter = measured(on_gpu=False)
    tuned = Tuner(interpreter, None, trials=3, parallel=1).tune(written)
    assert tuned.trials == 1 and len(interpreter.evaluated) == 1 and tuned.genome.params == {"BLOCK": 256}
    gpu = measured(on_gpu=True)
    assert Tuner(gpu, None, trials=3, parallel=1).tune(written).trials == 3 and len(gpu.evaluated) == 3  # timed: tuned
    offline = measured(on_gpu=False)
    Tuner(offline, None, trials=3, parallel=1).tune(replace(written, operator="param_mutation"))
    assert len(offline.evaluated) == 3  # what an offline operator made is tuned, as before
