"""Issue 42: strategies compared at truly equal and independent LLM budgets. A sweep of two strategies through the
real command (`kernelevo run --multirun experiment=strategies`), litellm's real HTTP client and the scripted server
(replies by role: a plan, or a new correct kernel): each run makes exactly its budget of calls, every one sent (no
reply crosses runs: each run has its own namespace in the sweep's reply cache, which is under the sweep, not in
$HOME); the table's calls, children and correct rate are the run stores'; and the same sweep replayed from its own
records and caches, no server, gives the same table."""
import json
from pathlib import Path

import pytest

from conftest import CANDIDATES, SCALE_SHIFT, kernelevo
from evo.records.store import RunStore
from llm_server import ScriptedLLMServer
from llm_fakes import Replies

pytestmark = pytest.mark.slow

BUDGET = 4


def sweep(tmp_path: Path, sweep_dir: Path, url: str, *extra: str):
    return kernelevo(
        "run", "--multirun", "experiment=strategies", f"problem={SCALE_SHIFT}",
        f"problem.seed={CANDIDATES / 'good.py'}", "+problem.sizes.dim=4000", "operators=llm_mutation", "llm=local",
        "llm.model=openai/scripted-model", f"llm.api_base={url}", "llm.timeout_s=30", "llm.max_retries=0",
        f"llm.budget.max_calls={BUDGET}", "search.max_evaluations=null", "search/strategy=sampling,tree",
        "search.seed=0", "search.mu=1", "search.lambda_=2", "search.tuner.trials=1", "fitness.trials=2",
        "fitness.timing.interpreter_reps=1", "llm.context.parts.profiling=false", "llm.context.parts.top_k=false",
        f"hydra.sweep.dir={sweep_dir}", *extra, cwd=tmp_path)


def stores(sweep_dir: Path) -> dict:
    found = {}
    for db in sorted(sweep_dir.glob("*/run.db")):
        store = RunStore(db.parent, create=False)
        try:
            found[db.parent.name] = (store.llm_calls(), [i for i in store.individuals() if i.generation > 0])
        finally:
            store.close()
    return found


def test_a_sweep_spends_each_runs_budget_on_its_own_and_replays_to_the_same_table(tmp_path):
    home = Path.home()
    with ScriptedLLMServer(Replies()) as server:
        done = sweep(tmp_path, tmp_path / "sweep", server.url)
        sent, url = len(server.requests), server.url
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = stores(tmp_path / "sweep")
    assert len(runs) == 2 and sent == 2 * BUDGET
    for calls, _ in runs.values():
        assert len(calls) == BUDGET and not any(call["cached"] for call in calls)  # each its own, none replayed
    caches = sorted(p.name for p in (tmp_path / "sweep" / "llm_cache").iterdir() if p.is_dir())
    assert caches == sorted(runs)  # one namespace per run, under the sweep
    assert not (home / ".cache" / "kernelevo" / "llm").exists()

    table = json.loads((tmp_path / "sweep" / "strategies.json").read_text())
    for run in table["runs"]:
        calls, children = runs[Path(run["run"]).name]
        assert run["llm_calls"] == len(calls) and run["children"] == len({c["individual"] for c in calls})
        assert run["correct"] == sum(ind.ok for ind in children)
    text = (tmp_path / "sweep" / "strategies.md").read_text()
    assert "best speed-up" not in text and "no speed-up" in text and "depth" in text  # on the CPU

    replay = sweep(tmp_path, tmp_path / "replay", url, "fitness/backend=replay",
                   f"fitness.backend.record={tmp_path / 'sweep'}", f"llm.cache_dir={tmp_path / 'sweep' / 'llm_cache'}",
                   "llm.check=false")
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
    assert all(all(call["cached"] for call in calls) for calls, _ in stores(tmp_path / "replay").values())
    for name in ("strategies.json", "strategies.md"):
        assert (tmp_path / "replay" / name).read_text() == (tmp_path / "sweep" / name).read_text()
