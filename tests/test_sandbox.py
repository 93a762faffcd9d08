"""The worker environment: no secrets, private directory and caches."""
from pathlib import Path

from fitness.sandbox import is_secret_variable, worker_environment


def test_secret_and_provider_variables_are_dropped():
    base = {"PATH": "/usr/bin", "OPENAI_API_KEY": "x", "GITHUB_TOKEN": "x", "DB_PASSWORD": "x",
            "AWS_REGION": "x", "ANTHROPIC_BASE_URL": "x", "MY_CREDENTIALS_FILE": "x", "HF_HOME": "x",
            "CUDA_VISIBLE_DEVICES": "0", "TRITON_INTERPRET": "1"}
    env = worker_environment(base, Path("/tmp/w"), interpret=False)
    assert {k for k in base if k in env} == {"PATH", "CUDA_VISIBLE_DEVICES"}
    assert env["HOME"] == "/tmp/w" and env["TRITON_CACHE_DIR"] == "/tmp/w/triton"
    assert "TRITON_INTERPRET" not in env


def test_interpreter_workers_get_triton_interpret_and_a_trusted_cache_can_be_shared():
    env = worker_environment({}, Path("/tmp/w"), interpret=True, cache_dir=Path("/cache"))
    assert env["TRITON_INTERPRET"] == "1" and env["TORCHINDUCTOR_CACHE_DIR"] == "/cache/inductor"


def test_secret_names():
    assert is_secret_variable("api_key") and is_secret_variable("LITELLM_MASTER") and not is_secret_variable("PATH")
