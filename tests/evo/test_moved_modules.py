"""Issue 46: evo/ and fitness/ moved into subpackages. A run stored before the move names its plug-ins by their old
module paths (its config's ``_target_``: the selection, the strategy, the evaluation and bench backends); the run
store maps them when it reads a config back (``evo.records.moved``), so such a run still resumes and reports. The
old paths are built from parts here, so the reorganisation script, which rewrites every old path it finds, leaves
them old."""
import importlib.util
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from conftest import REPO
from evo.records.moved import MOVED, current, current_targets
from evo.records.store import RunStore
from kernelevo.config import CONF_DIR


def old(*parts: str) -> str:
    return ".".join(parts)


def _targets(config, where=""):
    """path -> _target_ of every plug-in node of a config (dicts and lists)."""
    found = {}
    if isinstance(config, dict):
        for key, value in config.items():
            if key == "_target_" and isinstance(value, str):
                found[where] = value
            else:
                found.update(_targets(value, f"{where}.{key}".lstrip(".")))
    elif isinstance(config, list):
        for i, value in enumerate(config):
            found.update(_targets(value, f"{where}.{i}"))
    return found


def _before_the_move(config):
    """`config` as a run stored it before the move: every moved module's path put back."""
    back = {new: before for before, new in MOVED.items()}
    if isinstance(config, dict):
        return {k: next((back[m] + v[len(m):] for m in back if v.startswith(m + ".")), v)
                if k == "_target_" and isinstance(v, str) else _before_the_move(v) for k, v in config.items()}
    if isinstance(config, list):
        return [_before_the_move(v) for v in config]
    return config




def _file(module: str) -> Path:
    return REPO / (module.replace(".", "/") + ".py")


def test_every_moved_module_lives_at_its_new_path_only():
    assert MOVED and all(importlib.util.find_spec(new) is not None and _file(new).is_file() for new in MOVED.values())
    assert [before for before in MOVED if _file(before).exists() or (REPO / before.replace(".", "/")).exists()] == []


def test_an_old_target_is_mapped_and_anything_else_is_left_as_it_is():
    assert current(old("evo", "selection", "Tournament")) == "evo.evolution.selection.Tournament"
    assert current(old("evo", "bench")) == "evo.benchmark.bench"
    assert current("operators.param_mutation.ParamMutation") == "operators.param_mutation.ParamMutation"
    assert current(old("evo", "selections", "X")) == old("evo", "selections", "X")  # a prefix of a name is not one
    config = {"a": [{"_target_": old("evo", "strategy", "Tree"), "epsilon": 0.3}], "note": old("evo", "bench")}
    assert current_targets(config) == {"a": [{"_target_": "evo.evolution.strategy.Tree", "epsilon": 0.3}],
                                       "note": old("evo", "bench")}  # only _target_ values are paths to follow


def test_a_run_stored_before_the_move_reads_back_with_its_plugins_at_their_homes(tmp_path):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["search/strategy=tree", "fitness/backend=local"])
    now = OmegaConf.to_container(cfg, resolve=True)
    stored = _before_the_move(now)
    assert _targets(stored)["search.selection"].startswith(old("evo", "selection") + ".")  # really the old paths
    assert _targets(stored)["fitness.backend"] == old("evo", "evaluation", "LocalEvaluators")
    store = RunStore(tmp_path)
    store.set_meta("config", stored)
    store.set_meta("note", old("evo", "bench"))  # other meta values are not configs: as stored
    store.close()

    read = RunStore(tmp_path, create=False)
    assert read.get_meta("config") == now and read.get_meta("note") == old("evo", "bench")
    read.close()
    assert RunStore.saved_run(tmp_path) == now  # what the bench and the run-directory checks read
    for where, target in _targets(RunStore.saved_run(tmp_path)).items():
        assert get_class(target), where

    from kernelevo.resuming import saved_config  # what `kernelevo resume` starts from
    resumed = saved_config(tmp_path)
    assert type(instantiate(resumed.search.strategy)).__name__ == "Tree"
    assert type(instantiate(resumed.search.selection)).__module__ == "evo.evolution.selection"
