"""The supply experiment's harness (experiments/scale/supply_cpu.py: the search, tuner, store and evaluation service
as a run wires them, over fake evaluators) on the CPU: the occupancy of four evaluators' slots, and a lineage that is
a function of the evaluator count alone (moved from tests/evo/test_supply.py: the product's tests import no experiment
code)."""
from experiments.scale.supply_cpu import measure


def test_generation_0_and_after_it_keep_four_evaluators_slots_busy():
    """Four evaluators of 6 slots (24), two seeds: generation 0 asks every slot at once (it asked 12 before its seeds'
    trials followed the evaluators: at most half the slots busy) and after it the children keep them busy."""
    m = measure(4, per_evaluator=6, seeds=2, generations=2, hold_s=0.6)  # long beside the driver's work per trial
    assert m.generation0_occupancy >= 0.55 and m.generation0_most == 24
    assert m.after_occupancy >= 0.4 and m.after_most == 24
    assert m.generation0_evaluations == 2 * 24  # each seed: the tuner's 6 trials per evaluator


def test_the_lineage_is_a_function_of_the_evaluator_count_not_of_the_slots_or_the_finishing_order():
    first = measure(4, per_evaluator=6, seeds=2, generations=2, hold_s=0.02, spread=3.0)
    again = measure(4, per_evaluator=2, seeds=2, generations=2, hold_s=0.02, spread=3.0)  # other slots and order
    assert first.lineage == again.lineage and first.generation0_most >= 4
    one = measure(1, per_evaluator=6, seeds=2, generations=2, hold_s=0.02, spread=3.0)
    assert one.generation0_evaluations == 2 * 6 and first.generation0_evaluations == 2 * 24
    children = [sum(1 for ident, *_ in m.lineage if ident.startswith("1.")) for m in (one, first)]
    assert children[0] <= 4 < children[1] <= 16  # a generation: lambda_ (4) per evaluator
