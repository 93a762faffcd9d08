"""The LLM a run would use, checked before anything is made, as a new user meets it: a missing key (no network), a
server that is not there, a refused key, a model the server does not serve, LLM operators with no `llm=` -- each one
line naming the cause and the fix, exit 2, nothing written. Against the scripted OpenAI-compatible server.

The command line is called in-process (``kernelevo.cli.main``): a check that fails exits before Hydra starts, and a
run that would start anyway fails the test at once rather than running.
"""
import socket

import pytest

from kernelevo.core.errors import KernelevoError
from kernelevo import cli
from kernelevo.commands import COMMANDS
from kernelevo.validate import Validator
from llm_fakes import refused_url
from llm_server import ScriptedLLMServer

KEY_ENV = "KERNELEVO_TEST_LLM_KEY"
SECRET = "sk-kernelevo-check-secret"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """Run in an empty directory, with a test key, and fail at once should a run start."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, SECRET)

    def no_run(**kwargs):
        raise AssertionError("the check passed and the run started")

    monkeypatch.setattr(cli.hydra, "main", no_run)


def local(url: str, *extra: str) -> list[str]:
    return ["run", "operators=llm_mutation", "llm=local", "llm.model=openai/scripted-model", f"llm.api_base={url}",
            f"llm.api_key_env={KEY_ENV}", "search=tiny", *extra]


def one_line_error(capsys, args: list[str], tmp_path) -> str:
    """The command's error: exit 2, one line on stderr, no traceback, nothing written."""
    with pytest.raises(SystemExit) as info:
        cli.main(args)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert SECRET not in err
    assert not list(tmp_path.iterdir()), list(tmp_path.rglob("*"))
    return err


@pytest.mark.parametrize("preset, operators, variable", [("openai", "llm_mutation", "OPENAI_API_KEY"),
                                                          ("openai", "llm", "OPENAI_API_KEY"),
                                                          ("anthropic", "llm", "ANTHROPIC_API_KEY")])
def test_a_missing_key_is_named_before_anything_is_made(capsys, tmp_path, monkeypatch, preset, operators, variable):
    """Was: exit 0, "1 generations done", no child (or offline children only), the key never mentioned."""
    monkeypatch.delenv(variable, raising=False)

    def no_network(*args):
        raise AssertionError("the key check went to the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    err = one_line_error(capsys, ["run", f"operators={operators}", f"llm={preset}", "search=tiny"], tmp_path)
    assert f"the environment variable {variable} is not set" in err and f"export {variable}=" in err
    assert "operators=offline" in err


@pytest.mark.parametrize("extra", [(), ("llm.max_retries=0",)])
def test_nothing_listening_is_named_with_its_url_at_once(capsys, tmp_path, extra):
    """Was: 11 minutes of "InternalServerError (HTTP 500), attempt 3/5", then exit 0 (or, with no retries, 12 s and
    no message at all)."""
    url = refused_url()
    err = one_line_error(capsys, local(url, *extra), tmp_path)
    assert f"nothing answers at {url}" in err and "Connection refused" in err
    assert "start the server" in err and "llm.check=false" in err


def test_a_refused_key_is_named_whether_the_model_list_or_a_request_refuses_it(capsys, tmp_path):
    with ScriptedLLMServer([], models=401) as server:  # GET /models answers 401
        err = one_line_error(capsys, local(server.url), tmp_path)
        assert server.requests == []
    assert "HTTP 401" in err and f"check the key in {KEY_ENV}" in err
    incorrect = "Incorrect API key provided"
    with ScriptedLLMServer([{"status": 401, "message": incorrect}], models=None) as server:  # no /models: a request
        url = server.url
        err = one_line_error(capsys, local(url), tmp_path)
        assert len(server.requests) == 1 and server.requests[0][2]["max_tokens"] < 100
    assert f"at {url}" in err and "HTTP 401" in err and incorrect in err  # the provider's own words


@pytest.mark.parametrize("status, message, fix", [
    (429, "You exceeded your current quota, please check your plan", "add credit to the account"),
    (404, "The model `scripted-model` does not exist", "check llm.model"),
])
def test_a_spent_quota_or_an_unknown_model_is_named_in_the_providers_words(capsys, tmp_path, status, message, fix):
    with ScriptedLLMServer([{"status": status, "message": message}], models=None) as server:
        err = one_line_error(capsys, local(server.url), tmp_path)
    assert f"HTTP {status}" in err and message in err and fix in err


def test_a_model_the_server_does_not_serve_is_named_with_what_it_serves(capsys, tmp_path):
    with ScriptedLLMServer([], models=["Qwen2.5-Coder-7B"]) as server:
        err = one_line_error(capsys, local(server.url), tmp_path)
        assert server.requests == []
    assert "does not list the model 'openai/scripted-model'" in err and "llm.model=openai/Qwen2.5-Coder-7B" in err
    with ScriptedLLMServer([], models=["scripted-model"]) as server:  # a role's own model is checked too
        err = one_line_error(capsys, local(server.url, "llm.roles.coder.model=openai/other"), tmp_path)
    assert "'openai/other'" in err


def test_llm_operators_without_an_llm_fail_before_the_run_directory(capsys, tmp_path):
    """Was: the check passed, the run directory was made, generation 0 evaluated, then an error (not resumable)."""
    for operators in ("llm", "llm_mutation"):
        err = one_line_error(capsys, ["run", f"operators={operators}", "search=tiny"], tmp_path)
        assert "need an LLM and none is chosen" in err and "llm=anthropic|local|openai" in err
        assert "operators=offline" in err


def checked(args: list[str]) -> None:
    """The command line's check of `kernelevo run ARGS`, which must pass."""
    cfg, overrides = Validator("run", "config").check(args[1:])
    run = COMMANDS["run"]  # its plan, then the check reaching its LLM (issue 46: the plan is what is checked)
    run.check(run.plan(cfg, overrides))


def test_a_server_that_answers_passes_in_one_line(capsys):
    with ScriptedLLMServer([]) as server:  # lists scripted-model: no request is sent
        url = server.url
        checked(local(url))
        assert server.requests == [] and server.model_requests == 1
    assert capsys.readouterr().out.strip() == f"[kernelevo] llm: openai/scripted-model listed by {url}/models"
    with ScriptedLLMServer([{"content": "OK"}], models=None) as server:  # no model list: one tiny request
        checked(local(server.url))
        (_, headers, body), = server.requests
    assert headers["Authorization"] == f"Bearer {SECRET}" and body["max_tokens"] < 100
    assert "answered a request" in capsys.readouterr().out
    with ScriptedLLMServer([{"status": 429, "message": "Rate limit reached"}], models=None) as server:
        checked(local(server.url))  # rate-limited: the provider knows the key and the model
    with ScriptedLLMServer([], models=401) as server:
        checked(local(server.url, "llm.check=false"))  # skipped: the cache may replay every reply
        assert server.model_requests == 0
    with ScriptedLLMServer([], models=401) as server:  # offline operators: an LLM nothing would ask, refused
        with pytest.raises(KernelevoError, match="an LLM is chosen .* but no operator of the run asks one"):
            checked(["run", "llm=local", f"llm.api_base={server.url}"])
        assert server.model_requests == 0
