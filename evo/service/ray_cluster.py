"""Ray, for the bench's Ray backend and the evaluation pool's (``bench/backend=ray``, ``fitness/backend=ray``): the
import with the install message, the connection to a cluster or a local Ray, and how to say where on it something
runs (``placement``). Ray is an optional extra, imported only through here, only when one of those backends is
chosen.
"""
from __future__ import annotations

import socket

from kernelevo.core.errors import KernelevoError

INSTALL = "pip install 'kernelevo[ray]' (or pip install ray)"
PROBE_TIMEOUT_S = 10.0  # a HOST:PORT that does not answer within this is an error (ray.init would wait for minutes)


def import_ray(chosen: str, error: type[Exception] = KernelevoError):
    """The ray module, or `error` saying that `chosen` (the backend, as the user selects it) needs it installed."""
    try:
        import ray
    except ImportError as exc:
        raise error(f"{chosen} needs Ray, which is not installed: {INSTALL}") from exc
    return ray


def placement(node: str, gpu_ids) -> str:
    """Where on a Ray cluster a task or actor runs: its node and the GPUs Ray gave it (``Ray node 10.0.0.2 GPU 1``;
    none: ``Ray node 10.0.0.2``). The evaluator actors' start line and the bench's Ray rows both say it so."""
    gpus = ",".join(str(i) for i in gpu_ids)
    return f"Ray node {node}" + (f" GPU {gpus}" if gpus else "")


def _probe(address: str, setting: str, error: type[Exception]) -> None:
    """Fail fast, naming the setting, when nothing listens at HOST:PORT (ray.init retries for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise error(f"{setting}={address!r}: not HOST:PORT; use auto (the cluster this host belongs to, else a local "
                    f"Ray), HOST:PORT of a running cluster's head (`ray start --head` prints it) or null (a local Ray)")
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise error(f"{setting}={address}: no Ray cluster answers there ({exc}); start one (`ray start --head` on "
                    f"the head node), correct the address, or use auto or null (a local Ray)") from exc


def connect(ray, address: str | None, setting: str, local_cpus: int | None = None,
            error: type[Exception] = KernelevoError) -> str:
    """Connect to the cluster at `address` (auto: the one this host belongs to, else a local Ray started here;
    HOST:PORT: that one, or `error` naming `setting`; null: a local Ray); says where."""
    if ray.is_initialized():
        where = "already connected"
    elif address is None:
        ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=False)
        where = "local"
    else:
        if address != "auto":
            _probe(str(address), setting, error)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
            where = f"cluster at {address}"
        except ConnectionError as exc:
            if address != "auto":
                raise error(f"{setting}={address}: could not join the Ray cluster there ({exc})") from exc
            ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=False)  # none running: a local one
            where = "local"
    return where
