"""The virtual bus in its own process, for the bus benchmarks (bus_bench, feetech_bench).

Run as ``hilbot sim-bus`` in a child process, the simulated servos do not share this
process's GIL, and their CPU time can be reported beside the benchmark's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def process_cpu(pid: int) -> float:
    """CPU time [s] the process ``pid`` has used so far (Linux /proc); NaN once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def sim_bus_process(
    options: list[str], preexec_fn: Callable[[], None] | None = None
) -> Iterator[tuple[str, int]]:
    """Run ``hilbot sim-bus`` with ``options``; yield its ``(port, pid)`` once it serves.

    Args:
        options: the command's options (servos, bit rate, family...).
        preexec_fn: run in the child before it starts (e.g. to set its priority).
    """
    args = [sys.executable, "-m", "hilbot", "sim-bus", *options]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().split()[1]
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)
