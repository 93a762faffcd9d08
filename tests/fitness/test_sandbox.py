"""The worker environment (no secrets, private directory and caches), the fork server, and Triton's driver stubs
shared with untrusted workers only as copies."""
import os
from pathlib import Path

from fitness.measure.result import WorkerJob
from fitness.workers.sandbox import Sandbox
from fitness.workers.worker_env import copy_stubs, is_secret_variable, stub_files, worker_environment


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


def test_fork_server_is_single_threaded_has_no_secrets_and_forks_every_worker():
    base = {**os.environ, "OPENAI_API_KEY": "sk-not-for-candidates", "MY_DB_PASSWORD": "hunter2"}
    with Sandbox("cpu", base_env=base, spares=1) as sandbox:
        outcome = sandbox.run(WorkerJob("prewarm", "cpu"), timeout_s=60)
        zygote = sandbox.zygote_pid
        environ = Path(f"/proc/{zygote}/environ").read_bytes()
        threads = len(os.listdir(f"/proc/{zygote}/task"))
        trusted = sandbox.run(WorkerJob("prewarm", "cpu"), timeout_s=60, trusted=True)
    assert outcome.status == "finished" and outcome.result == {**outcome.result, "status": "ok", "prewarm": "skipped"}
    assert outcome.result["worker"]["forked_by"] == zygote == trusted.result["worker"]["forked_by"]
    assert outcome.result["phases_s"]["import"] == 0 and outcome.result["phases_s"]["fork"] < 5
    assert b"sk-not" not in environ and b"hunter2" not in environ and b"OPENAI_API_KEY" not in environ
    assert threads == 1  # forking a multi-threaded process is unsafe
    assert not Path(f"/proc/{outcome.pid}").exists() or Path(f"/proc/{outcome.pid}/stat").read_text().split()[2] in "ZX"


def test_only_driver_stubs_are_copied_and_as_copies(tmp_path):
    trusted = tmp_path / "trusted" / "triton"
    for key, name in (("k1", "cuda_utils.cpython-312-x86_64-linux-gnu.so"), ("k2", "__triton_launcher.so"),
                      ("k3", "kernel.cubin"), ("k4", "kernel.so")):
        (trusted / key).mkdir(parents=True)
        (trusted / key / name).write_bytes(b"trusted")
    files = stub_files(trusted)
    assert sorted(p.parent.name for p in files) == ["k1", "k2"]
    private = tmp_path / "worker" / "triton"
    copy_stubs(files, private)
    copies = sorted(p.relative_to(private).as_posix() for p in private.rglob("*") if p.is_file())
    assert copies == ["k1/cuda_utils.cpython-312-x86_64-linux-gnu.so", "k2/__triton_launcher.so"]
    (private / "k2" / "__triton_launcher.so").write_bytes(b"poisoned by a candidate")
    assert (trusted / "k2" / "__triton_launcher.so").read_bytes() == b"trusted"
    assert stub_files(tmp_path / "missing") == []
