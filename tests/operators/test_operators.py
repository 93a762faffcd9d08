"""Offline variation operators: children differ from their parents, stay inside their declared
space and hard bounds, keep the TUNABLE convention, and are reproducible from the rng. Pure Python, no kernels."""
import ast
import pickle
import random
from dataclasses import replace

import pytest

from kernelevo.core.genome import Genome, declared_space, module_constants
from kernelevo.core.individual import Individual
from fitness.problems.problem import resolve_problem, suite_names
from hardware_profiles import load_profile
from hardware_profiles.limits import value_bounds
from operators import Operator, OperatorContext
from operators.knob_mutation import KnobMutation
from operators.param_mutation import ParamMutation
from operators.space_crossover import SpaceCrossover
from operators.space_mutation import SpaceMutation

H100 = load_profile("h100_sxm")
CTX = OperatorContext(generation=3, profile=H100)
MUTATIONS = [ParamMutation(), SpaceMutation(), KnobMutation()]

KNOB_SOURCE = '''
import triton

BLOCK_SIZE = 1024
GROUP_M = 8
TUNABLE = {"BLOCK_SIZE": [512, 1024]}


def forward(x):
    kernel[(1,)](x, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
'''


def seed(name: str = "matmul") -> Genome:
    return Genome.from_source(resolve_problem(name).seed_source())


def knob_genome(source: str = KNOB_SOURCE) -> Genome:
    return Genome.from_source(source)


def inds(genomes: list[Genome]) -> list[Individual]:
    """Parents as operators receive them: individuals (lineage ids are irrelevant to the offline operators)."""
    return [Individual(f"0.{i}", genome) for i, genome in enumerate(genomes)]


def assert_valid_child(child: Genome, parents: list[Genome], op: Operator, context: OperatorContext = CTX):
    assert child.key not in {p.key for p in parents}
    ast.parse(child.rendered())
    assert declared_space(child.source) == child.space
    assert set(child.params) == set(child.space)
    assert all(child.params[k] in child.space[k] for k in child.space)


def walk(op: Operator, genome: Genome, steps: int, rng: random.Random, context: OperatorContext = CTX):
    """Apply a mutation repeatedly to its own child; yields every child."""
    for _ in range(steps):
        children = op(inds([genome]), rng, context)
        if not children:
            return
        genome = children[0]
        yield genome


# --- every operator -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", [*MUTATIONS, SpaceCrossover(weight=0.5)], ids=lambda o: o.name)
def test_pickle_round_trip(op):
    clone = pickle.loads(pickle.dumps(op))
    assert clone == op and clone.weight == op.weight
    parents = [knob_genome()] if isinstance(op, KnobMutation) else [seed()]
    if op.arity == 2:
        parents.append(seed().with_params({"BLOCK_M": 128, "NUM_WARPS": 8}))
    ids = [c.key for c in op(inds(parents), random.Random(5), CTX)]
    assert ids and ids == [c.key for c in clone(inds(parents), random.Random(5), CTX)]


@pytest.mark.parametrize("op", MUTATIONS, ids=lambda o: o.name)
def test_mutations_are_deterministic_given_rng(op):
    parent = knob_genome() if isinstance(op, KnobMutation) else seed()
    runs = [[c.key for c in walk(op, parent, 20, random.Random(42))] for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0]) > 1


@pytest.mark.parametrize("cls", [ParamMutation, SpaceMutation, KnobMutation, SpaceCrossover])
def test_constructors_take_keywords_only(cls):
    assert cls(weight=2.5).weight == 2.5
    with pytest.raises(TypeError):
        cls(2.5)


def test_wrong_number_of_parents_is_an_error():
    with pytest.raises(ValueError, match="takes 1"):
        ParamMutation()(inds([seed(), seed()]), random.Random(0), CTX)
    with pytest.raises(ValueError, match="takes 2"):
        SpaceCrossover()(inds([seed()]), random.Random(0), CTX)


def test_no_tunable_space_gives_no_child():
    bare = Genome.from_source("import triton\n\nx = 1\n")
    for op in (ParamMutation(), SpaceMutation(), KnobMutation()):
        assert op(inds([bare]), random.Random(0), CTX) == []


# --- ParamMutation ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", suite_names())
def test_param_mutation_moves_declared_params_to_declared_choices(name):
    parent, op = seed(name), ParamMutation(max_params=2)
    rng = random.Random(7)
    for _ in range(30):
        (child,) = op(inds([parent]), rng, CTX)
        assert_valid_child(child, [parent], op)
        changed = [k for k in parent.space if child.params[k] != parent.params[k]]
        assert 1 <= len(changed) <= 2
        assert child.space == parent.space and child.source == parent.source


def test_param_mutation_neighbour_steps_are_adjacent():
    parent, op = seed("matmul"), ParamMutation(max_params=1, neighbour_prob=1.0)
    rng = random.Random(3)
    for _ in range(50):
        (child,) = op(inds([parent]), rng, CTX)
        (name,) = [k for k in parent.space if child.params[k] != parent.params[k]]
        choices = parent.space[name]
        assert abs(choices.index(child.params[name]) - choices.index(parent.params[name])) == 1


def test_param_mutation_skips_single_choice_params():
    parent = knob_genome(KNOB_SOURCE.replace('[512, 1024]', '[1024]'))
    assert ParamMutation()(inds([parent]), random.Random(0), CTX) == []


# --- SpaceMutation ---------------------------------------------------------------------------------------------

def test_space_mutation_edits_one_power_of_two_list():
    parent, op = seed("matmul"), SpaceMutation()
    rng = random.Random(11)
    for _ in range(40):
        (child,) = op(inds([parent]), rng, CTX)
        assert_valid_child(child, [parent], op)
        edited = [k for k in parent.space if child.space[k] != parent.space[k]]
        assert len(edited) == 1
        old, new = set(parent.space[edited[0]]), set(child.space[edited[0]])
        assert len(old ^ new) == 1
        added = new - old
        assert not added or added <= {max(old) * 2, min(old) // 2}
        assert child.params == parent.params


CAPPED = replace(H100, max_threads_per_block=512)


@pytest.mark.parametrize("profile,warp_cap", [(None, 32), (H100, 1024 // 32), (CAPPED, 16)])
def test_repeated_space_mutation_respects_bounds(profile, warp_cap):
    context = OperatorContext(generation=1, profile=profile)
    seen_warps = set()
    for name in ("matmul", "row_softmax"):
        parent = seed(name)
        for child in walk(SpaceMutation(), parent, 80, random.Random(0), context):
            assert declared_space(child.source) == child.space
            for key, choices in child.space.items():
                assert choices and choices == sorted(choices)
                low, high = value_bounds(key, profile)
                assert all(low <= c <= high for c in set(choices) - set(parent.space[key])), (key, choices)
                assert child.params[key] in choices
            seen_warps |= set(child.space["NUM_WARPS"])
            assert 1 <= min(child.space["NUM_WARPS"]) and max(child.space["NUM_WARPS"]) <= warp_cap
            if "BLOCK_K" in child.space:
                assert min(child.space["BLOCK_K"]) >= 16 and max(child.space["NUM_STAGES"]) <= 8
    assert {1, warp_cap} <= seen_warps  # the walks reached both ends, so the bounds were exercised


def test_space_mutation_never_drops_the_chosen_value_or_empties_a_list():
    parent = knob_genome(KNOB_SOURCE.replace('[512, 1024]', '[65536]').replace("= 1024", "= 65536"))
    rng = random.Random(0)
    for _ in range(20):
        (child,) = SpaceMutation()(inds([parent]), rng, CTX)
        assert child.space["BLOCK_SIZE"] == [32768, 65536]  # only growth downwards is possible


def test_space_mutation_ignores_non_power_of_two_spaces():
    src = 'FLAG = True\nSCALE = 3\nTUNABLE = {"FLAG": [True, False], "SCALE": [3, 5]}\n'
    assert SpaceMutation()(inds([Genome.from_source(src)]), random.Random(0), CTX) == []


# --- KnobMutation ----------------------------------------------------------------------------------------------

def test_knob_mutation_rewrites_call_literal():
    parent, op = knob_genome(KNOB_SOURCE.replace("GROUP_M = 8\n", "")), KnobMutation()
    values = set()
    for s in range(20):
        (child,) = op(inds([parent]), random.Random(s), CTX)
        assert_valid_child(child, [parent], op)
        (call,) = [n for n in ast.walk(ast.parse(child.source)) if isinstance(n, ast.Call) and n.keywords]
        (warps,) = [k.value.value for k in call.keywords if k.arg == "num_warps"]
        values.add(warps)
        assert child.source.replace(f"num_warps={warps}", "num_warps=4") == parent.source
        assert child.space == parent.space and child.params == parent.params
    assert values == {2, 8}


def test_knob_mutation_call_literal_respects_bounds_and_byte_offsets():
    src = KNOB_SOURCE.replace("GROUP_M = 8\n", "").replace("(x, ", '("é", x, ').replace("num_warps=4", "num_warps=32")
    (child,) = KnobMutation()(inds([knob_genome(src)]), random.Random(0), CTX)
    assert 'kernel[(1,)]("é", x, BLOCK_SIZE=BLOCK_SIZE, num_warps=16)' in child.source
    capped = OperatorContext(generation=1, profile=replace(H100, max_threads_per_block=512))
    (child,) = KnobMutation()(inds([knob_genome(src.replace("=32", "=16"))]), random.Random(0), capped)
    assert "num_warps=8)" in child.source


def test_knob_mutation_declares_undeclared_constant():
    parent = knob_genome(KNOB_SOURCE.replace("num_warps=4", "num_warps=NUM_WARPS"))
    op = KnobMutation()
    for s in range(10):
        (child,) = op(inds([parent]), random.Random(s), CTX)
        assert_valid_child(child, [parent], op)
        assert child.space == {**parent.space, "GROUP_M": [4, 8, 16]}
        assert child.params["GROUP_M"] in (4, 16)
        assert module_constants(child.rendered(), ["GROUP_M"])["GROUP_M"] == child.params["GROUP_M"]


def test_knob_mutation_adds_tunable_when_source_has_none():
    parent = Genome.from_source("import triton\n\nGROUP_M = 8\n\n\ndef f():\n    return GROUP_M\n")
    (child,) = KnobMutation()(inds([parent]), random.Random(0), CTX)
    assert_valid_child(child, [parent], KnobMutation())
    assert child.space == {"GROUP_M": [4, 8, 16]}


def test_knob_mutation_without_knobs_gives_nothing():
    assert KnobMutation()(inds([seed("matmul")]), random.Random(0), CTX) == []  # every knob already declared


# --- SpaceCrossover --------------------------------------------------------------------------------------------

def test_space_crossover_mixes_same_structure_parents():
    rng = random.Random(5)
    base = seed("matmul")
    a = next(iter(walk(SpaceMutation(), base, 1, rng)))
    b = ParamMutation(max_params=3)(inds([base]), rng, CTX)[0]
    op = SpaceCrossover()
    made = 0
    for _ in range(30):
        for child in op(inds([a, b]), rng, CTX):
            made += 1
            assert_valid_child(child, [a, b], op)
            for key in child.space:
                assert set(child.space[key]) == set(a.space[key]) | set(b.space[key])
                assert child.params[key] in (a.params[key], b.params[key])
    assert made


def test_space_crossover_of_two_param_children_never_returns_a_parent():
    rng = random.Random(9)
    base = seed("row_softmax")
    a, b = ParamMutation()(inds([base]), rng, CTX)[0], ParamMutation()(inds([base]), rng, CTX)[0]
    for _ in range(20):
        for child in SpaceCrossover()(inds([a, b]), rng, CTX):
            assert (child.space, child.params) not in [(a.space, a.params), (b.space, b.params)]


def test_space_crossover_rejects_different_structure_and_identical_parents():
    op = SpaceCrossover()
    assert op(inds([seed("matmul"), seed("row_softmax")]), random.Random(0), CTX) == []
    assert op(inds([seed("matmul"), seed("matmul")]), random.Random(0), CTX) == []
    edited = Genome.from_source(seed("matmul").source.replace("acc += tl.dot(a, b)", "acc = tl.dot(a, b, acc)"))
    assert op(inds([seed("matmul"), edited]), random.Random(0), CTX) == []
