"""When this process started (``process_started``), for the run's account of its start-up."""
from __future__ import annotations

import os
import time


def process_started() -> float | None:
    """When this process started (seconds since the epoch, as time.time()), from Linux's /proc; None elsewhere. Lets
    a run say how long its start (the interpreter, imports, the config) took before its own first line ran."""
    try:
        stat = open("/proc/self/stat").read()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, starttime: clock ticks after boot
        up = float(open("/proc/uptime").read().split()[0])  # seconds after boot, now
        return time.time() - (up - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None
