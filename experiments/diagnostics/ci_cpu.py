"""Where the test suite's CPU goes (issue 67: CI within 8 minutes on two cores), per test file and per kind of process.

A pytest plugin and its table. Each pytest-xdist worker records, around every test, the CPU seconds (user + sys) of
itself and of its whole process tree (from /proc: the processes alive below it, and what it and they reaped), and,
sampled every CPUPROF_PERIOD seconds, the CPU and the starts of each kind of process below it (fork servers, their
workers, Inductor captures, `kernelevo` processes, Ray). The suite runs as CI runs it, the plugin added:

    rm -rf /tmp/ci-h && git clone -q REPO /tmp/ci-h && cd /tmp/ci-h && \
      CPUPROF_OUT=/tmp/cpu CPUPROF_PERIOD=1 PYTHONPATH=REPO/experiments/diagnostics PYTEST_ADDOPTS="-p ci_cpu" \
      /usr/bin/time -v env CI=true bash .ci/run
    python experiments/diagnostics/ci_cpu.py /tmp/cpu 30       # the 30 files of most CPU, and the kinds

A process that starts and ends between two samples is counted in its test's CPU but in no kind; a fork server's
workers are counted when it reaps them ("workers"; "worker" counts their starts). The sampler's own CPU is written
at the end (`sampler_cpu`).
Results: experiments/results/ci_cpu_2core/.
"""
import collections
import glob
import json
import os
import resource
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")
KINDS = (("inductor.capture", "capture"), ("kernelevo.cli", "kernelevo"), ("import json, sys", "kernelevo"),
         ("raylet", "ray"), ("gcs_server", "ray"), ("ray", "ray"))
_root = os.getpid()
_lock = threading.Lock()
_seen: dict[int, tuple[str, float, float]] = {}  # pid -> (kind, its own CPU, its reaped children's)
_ended: collections.Counter = collections.Counter()  # kind -> CPU of the processes that ended
_starts: collections.Counter = collections.Counter()
_sampler = [0.0]
_out = None
_before: dict[str, dict] = {}


def _stat(pid: int):
    """(parent pid, own CPU, reaped children's CPU) of a process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK
    except (OSError, ValueError, IndexError):
        return None


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kind(pid: int, parent: int) -> str:
    command = _command(pid)
    if "fitness.workers.zygote" in command:
        return "worker" if "fitness.workers.zygote" in _command(parent) else "fork server"
    return next((kind for key, kind in KINDS if key in command), "other")


def _tree() -> dict[int, tuple]:
    """The processes below this one now: pid -> (parent, own CPU, reaped children's CPU)."""
    table = {int(e): s for e in os.listdir("/proc") if e.isdigit() and (s := _stat(int(e))) is not None}
    children = collections.defaultdict(list)
    for pid, (parent, *_) in table.items():
        children[parent].append(pid)
    found, todo = {}, [_root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = table[child]
            todo.append(child)
    return found


def _sample() -> dict[int, tuple]:
    tree = _tree()
    with _lock:
        for pid, (parent, own, reaped) in tree.items():
            if pid not in _seen:
                kind = _kind(pid, parent)
                _starts[kind] += 1
            else:
                kind = _seen[pid][0]
            _seen[pid] = (kind, own, reaped)
        for pid in [pid for pid in _seen if pid not in tree]:
            kind, own, reaped = _seen.pop(pid)
            _ended[kind] += own if kind != "worker" else 0.0  # a worker's CPU: its fork server's, once reaped
            if kind == "fork server":
                _ended["workers"] += reaped
    return tree


def _loop() -> None:
    period = float(os.environ.get("CPUPROF_PERIOD", "1"))
    while True:
        time.sleep(period)
        try:
            _sample()
        except OSError:
            pass
        _sampler[0] = time.thread_time()


def _snapshot() -> dict:
    tree = _sample()
    with _lock:
        kinds = collections.Counter(_ended)
        for kind, own, reaped in _seen.values():
            kinds[kind] += own if kind != "worker" else 0.0
            if kind == "fork server":
                kinds["workers"] += reaped
        starts = dict(_starts)
    me, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"self": me.ru_utime + me.ru_stime, "reaped": reaped.ru_utime + reaped.ru_stime,
            "tree": sum(own + children for _, own, children in tree.values()), "kinds": dict(kinds), "starts": starts,
            "t": time.perf_counter()}


# the plugin (in each pytest-xdist worker; the controller runs no test and records nothing) -----------------------
def pytest_configure(config) -> None:
    global _out
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None and getattr(config.option, "numprocesses", None):
        return  # the controller: its workers are its children
    os.makedirs(os.environ.get("CPUPROF_OUT", "ci-cpu"), exist_ok=True)
    _out = open(os.path.join(os.environ.get("CPUPROF_OUT", "ci-cpu"), f"{worker or 'main'}-{_root}.jsonl"), "a")
    threading.Thread(target=_loop, daemon=True).start()
    _out.write(json.dumps({"id": "<start>", **_snapshot()}) + "\n")


def pytest_collection_finish(session) -> None:
    if _out is not None:
        _out.write(json.dumps({"id": "<collected>", **_snapshot()}) + "\n")


def pytest_runtest_logstart(nodeid, location) -> None:
    if _out is not None:
        _before[nodeid] = _snapshot()


def pytest_runtest_logfinish(nodeid, location) -> None:
    if _out is not None and nodeid in _before:
        _out.write(json.dumps({"id": nodeid, "a": _before.pop(nodeid), "b": _snapshot()}) + "\n")
        _out.flush()


def pytest_unconfigure(config) -> None:
    if _out is not None:
        _out.write(json.dumps({"id": "<end>", "sampler_cpu": _sampler[0], **_snapshot()}) + "\n")
        _out.close()


# the table ------------------------------------------------------------------------------------------------------
def cpu(a: dict, b: dict) -> float:
    return (b["self"] - a["self"]) + (b["reaped"] - a["reaped"]) + (b["tree"] - a["tree"])


def table(folder: str, top: int) -> str:
    files = collections.defaultdict(lambda: [0.0, 0.0, 0, collections.Counter(), collections.Counter()])
    collection = sampler = 0.0
    for path in glob.glob(os.path.join(folder, "gw*.jsonl")) + glob.glob(os.path.join(folder, "main-*.jsonl")):
        rows = [json.loads(line) for line in open(path)]
        marks = {r["id"]: r for r in rows if r["id"].startswith("<")}
        collection += marks["<collected>"]["self"] - marks["<start>"]["self"]
        sampler += marks.get("<end>", {}).get("sampler_cpu", 0.0)
        for r in rows:
            if r["id"].startswith("<"):
                continue
            entry, (a, b) = files[r["id"].split("::")[0]], (r["a"], r["b"])
            entry[0] += cpu(a, b)
            entry[1] += b["self"] - a["self"]
            entry[2] += 1
            entry[3].update({k: b["kinds"].get(k, 0) - a["kinds"].get(k, 0) for k in b["kinds"]})
            entry[4].update({k: b["starts"].get(k, 0) - a["starts"].get(k, 0) for k in b["starts"]})
    lines = [f"tests' CPU {sum(e[0] for e in files.values()):.0f} s (in the pytest workers themselves "
             f"{sum(e[1] for e in files.values()):.0f} s), collection {collection:.0f} s, sampler {sampler:.0f} s",
             "| file | tests | CPU s | in pytest's process | by kind of process: CPU s (starts) |",
             "|---|---|---|---|---|"]
    kinds, starts = collections.Counter(), collections.Counter()
    for name, (total, own, count, by, started) in sorted(files.items(), key=lambda item: -item[1][0]):
        kinds.update(by)
        starts.update(started)
        if len(lines) < top + 3:
            shown = ", ".join(f"{k} {v:.0f}" + (f" ({started[k]})" if started.get(k) else "")
                              for k, v in by.most_common(4) if v >= 0.5)
            lines.append(f"| {name} | {count} | {total:.0f} | {own:.0f} | {shown} |")
    lines.append("all files, by kind: " + ", ".join(f"{k} {v:.0f} s" + (f" ({starts[k]} started)" if starts.get(k)
                                                                         else "") for k, v in kinds.most_common()))
    lines.append(f"workers forked (those alive at a sample): {starts.get('worker', 0)}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30))
