"""The running search's state (``evo.evolution.search.SearchState``): the checkpoint it saves and reads back, plus
what lives in the running search only; ``Search.run`` returns it as the dict it always returned."""
from dataclasses import fields

from evo.evolution.search import SearchState
from evo.records.checkpoint import Checkpoint

SAVED = Checkpoint(generation=2, best_s=1e-3, stale=1, children=8, elapsed_s=3.5, islands=[["0.0", "2.1"]],
                   seen=["k0", "k1"], tuned_at={"k1": 5}, logbook=[{"gen": 0, "nevals": 1}], hall_of_fame=["2.1"],
                   snapshots={"8": [["0.0", "2.1"]]}, ranks={"op:0.0": 2})


def test_a_resumed_state_saves_the_checkpoint_it_read_without_its_running_fields():
    state = SearchState(**SAVED.to_dict())  # as a resume begins: nothing folded into the generation yet
    assert (state.offspring, state.stop_reason) == (0, "")
    state.offspring, state.stop_reason = 3, "4 generations done"
    assert state.checkpoint() == SAVED and type(state.checkpoint()) is Checkpoint
    assert Checkpoint.from_json(state.checkpoint().to_json()) == SAVED


def test_the_state_a_run_returns_has_the_checkpoints_keys_and_the_running_ones():
    returned = SearchState(generation=-1).to_dict()
    assert set(returned) == {f.name for f in fields(Checkpoint)} | {"offspring", "stop_reason"}
    assert (returned["generation"], returned["stale"], returned["offspring"]) == (-1, 0, 0)
