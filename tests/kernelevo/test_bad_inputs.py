"""What a new user hit (issue 68): a seed file that is not Python, a damaged run store, a size that is not a number
or is 0, a group a resume does not take, an LLM chosen that nothing asks: each is one line naming the fix, exit code
2, and nothing written; ``--help`` of the commands with a mandatory key prints their help."""
import pytest

from conftest import kernelevo

RUN = ["run", "problem=elementwise_chain", "search=tiny"]
NO_RUN_STORE = "is not a readable run store (file is not a database): it is damaged or not kernelevo's; start a new run"


def refused(cli, *args) -> str:
    code, out, err = cli(*args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (code, out, err)
    return err


def tree(folder) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}


@pytest.mark.parametrize("args, message", [
    ([*RUN, "problem.seed=bad.py"], "problem.seed=bad.py: line 2: invalid syntax; fix the file, or set "
                                    "problem.seed=inductor to start from torch.compile's Triton kernels"),
    ([*RUN, "problem.sizes.batch_size=abc"], "size override batch_size='abc': the file's batch_size is 4096; give a "
                                             "whole number like it (e.g. problem.sizes.batch_size=4096)"),
    ([*RUN, "problem.sizes.batch_size=2.5"], "size override batch_size=2.5: the file's batch_size is 4096; give a "
                                             "whole number"),
    ([*RUN, "problem.sizes.batch_size=0"], "get_inputs() returns an empty tensor (item 1 has shape [0, 519]): a size "
                                           "is 0; give every size of the inputs at least 1"),
    ([*RUN, "llm=openai"], "an LLM is chosen (openai/gpt-4o-mini) but no operator of the run asks one "
                           "(operators=offline, the default) and llm.initialise is false: add operators=llm"),
    (["resume", "run_dir=D", "fitness/policy=strict-fp32"], "unknown group 'fitness/policy' for `kernelevo resume`; "
                                                            "it takes run_dir, search.generations"),
    (["resume", "run_dir=D", "fitness/policy=X"], "unknown group 'fitness/policy' for `kernelevo resume`"),
    (["report", "run_dir=D", "search=tiny"], "unknown group 'search' for `kernelevo report`; it takes run_dir"),
    ([*RUN, "problem=rmsnorm,row_softmax"], "problem=rmsnorm,row_softmax: a comma makes a sweep, which needs "
                                            "--multirun; for one value holding a comma, quote it: "
                                            "problem='rmsnorm,row_softmax'"),
    (["bench", "bench.problems=[row_softmax]", "bench.dir=B", "bench.title=a, b"],
     "bench.title=a, b: a comma makes a sweep, which needs --multirun"),  # it left B behind, with Hydra's message
    ([*RUN, "hydra.run.dir=D"], NO_RUN_STORE),
    (["resume", "run_dir=D"], NO_RUN_STORE),
    (["report", "run_dir=D"], NO_RUN_STORE),
])
def test_each_bad_input_is_one_line_naming_the_fix_and_leaves_nothing_behind(cli, tmp_path, args, message):
    (tmp_path / "bad.py").write_text("import torch\ndef broken(:\n")
    (tmp_path / "D").mkdir()
    (tmp_path / "D" / "run.db").write_bytes(b"not a database " * 200)  # a damaged store
    before = tree(tmp_path)
    assert message in refused(cli, *args)
    assert tree(tmp_path) == before  # no run folder, no .hydra, the damaged store as it was


def test_a_whole_number_for_the_refused_size_passes_its_checks(cli, tmp_path):
    """The refusals above are of the values, not of the key: a whole number of at least 1 gets past the size checks
    (and fails only on its missing seed file, one check later)."""
    assert "seed kernel file 'none.py' not found" in refused(cli, *RUN, "problem.sizes.batch_size=3",
                                                             "problem.seed=none.py")


@pytest.mark.parametrize("command, does", [("resume", "continue a run"), ("report", "write a run's report"),
                                           ("table", "one table over several bench directories")])
def test_help_of_a_command_with_a_mandatory_key_prints_its_help(tmp_path, command, does):
    shown = kernelevo(command, "--help", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith(f"kernelevo {command}: {does}"), shown
    assert "needs" not in shown.stderr and not list(tmp_path.iterdir())


def test_a_sweep_whose_other_runs_ask_the_llm_is_not_refused_for_its_offline_one(monkeypatch):
    from hydra.core.hydra_config import HydraConfig

    from kernelevo.plans import in_sweep

    monkeypatch.setattr(HydraConfig, "initialized", staticmethod(lambda: False))  # not a job of a sweep
    assert in_sweep(["operators=offline,llm", "llm=openai"]) and not in_sweep(["operators=offline", "llm=openai"])
