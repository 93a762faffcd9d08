"""The bench on a Ray cluster (``kernelevo bench bench/backend=ray``): each problem a Ray task holding one GPU.

A task runs the problem's search on whichever node Ray places it (Ray sets ``CUDA_VISIBLE_DEVICES`` for a task that
asks for a GPU), in a scratch bench directory there; it returns its row and its run directory as an archive, which
the driver unpacks into the bench directory, so the driver has every run whatever node made it. A started run
travels with its task and is resumed there. Ray is imported only here, only when this backend is chosen.
"""
from __future__ import annotations

import io
import tarfile
import tempfile
from pathlib import Path

from evo.benchmark.bench import LOGS, RUNS, BenchError, BenchTask, Row, run_task, started
from evo.service.ray_cluster import connect, import_ray, placement


def pack(folder: Path, files: list[Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in files:
            if path.exists():
                tar.add(path, arcname=str(path.relative_to(folder)))
    return buffer.getvalue()


def unpack(data: bytes, folder: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(folder, filter="data")


def remote_run(task: BenchTask, begun: bytes, timeout_s: float | None) -> tuple[Row, bytes]:
    """On a Ray worker: the problem's search (resumed from `begun`, its run so far, if any), row and archive back."""
    import ray

    with tempfile.TemporaryDirectory(prefix="kernelevo-bench-") as scratch:
        folder = Path(scratch)
        if begun:
            unpack(begun, folder)
        row = run_task(task, folder, gpu=None, timeout_s=timeout_s)  # the GPU Ray gave this task, if any
        gpu_ids = ray.get_gpu_ids()  # a row on the CPU interpreter names no GPU, as the local backend's
        row.gpu = placement(ray.util.get_node_ip_address(), gpu_ids) if gpu_ids else ""
        return row, pack(folder, [folder / RUNS / task.slug, folder / LOGS / f"{task.slug}.log"])


class RayBackend:
    """Every problem a Ray task with `num_gpus` GPUs and `num_cpus` CPUs; `address`: a running cluster (auto:
    the one this host belongs to, or a local Ray started here when none is running), HOST:PORT (that cluster) or null
    (a local Ray)."""

    def __init__(self, address: str | None = "auto", num_gpus: float = 1, num_cpus: float = 1,
                 timeout_s: float | None = None, local_cpus: int | None = None):
        self.address, self.num_gpus, self.num_cpus = address, num_gpus, num_cpus
        self.timeout_s, self.local_cpus = timeout_s, local_cpus
        self._where = ""

    def describe(self) -> str:
        return f"ray (address {self.address or 'local'}): {self.num_gpus:g} GPU and {self.num_cpus:g} CPU per problem"

    def _connect(self, ray) -> None:
        self._where = connect(ray, self.address, "bench.backend.address", self.local_cpus, BenchError)
        print(f"[bench] Ray: {self._where}, {ray.cluster_resources()}", flush=True)
        if self.num_gpus and not ray.cluster_resources().get("GPU"):
            raise BenchError(f"the Ray cluster ({self._where}) has no GPU, and each problem asks for "
                             f"{self.num_gpus}: start Ray on GPU nodes, or set bench.backend.num_gpus=0 to run on "
                             f"the CPU interpreter")

    def run(self, tasks: list[BenchTask], bench_dir: Path, done) -> None:
        """Every task a Ray task; `done(task, row)` as each comes back. Ctrl-C cancels the tasks not back (their
        searches die with their Ray workers; a started run that did not come back starts again on a re-run)."""
        ray = import_ray("bench/backend=ray", BenchError)
        self._connect(ray)
        run = ray.remote(num_gpus=self.num_gpus, num_cpus=self.num_cpus, max_retries=0)(remote_run)
        pending = {}
        for task in tasks:
            run_dir = bench_dir / RUNS / task.slug
            begun = pack(bench_dir, [run_dir]) if started(run_dir) else b""
            pending[run.remote(task, begun, self.timeout_s)] = task
        try:
            self._gather(ray, pending, bench_dir, done)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise

    @staticmethod
    def _gather(ray, pending: dict, bench_dir: Path, done) -> None:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            task = pending.pop(ready[0])
            try:
                row, archive = ray.get(ready[0])
                unpack(archive, bench_dir)
            except Exception as exc:  # noqa: BLE001 - a lost node or worker is this problem's row, not the bench's end
                row = Row(task.name, "failed", f"the Ray task failed: {type(exc).__name__}: {exc}"[:600])
            done(task, row)
