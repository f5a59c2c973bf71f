"""The virtual bus in its own process, for the bus benchmarks (bus, bus_growth, feetech, sim).

Run as ``hilbot sim-bus`` in a child process, the simulated servos do not share this
process's GIL, and their CPU time can be reported beside the benchmark's own. Both
processes may run ahead of the other jobs of a shared machine (:func:`raise_priority`),
as a robot runs its bus driver.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

PRIORITY = -10  # nice value when SCHED_FIFO is not allowed, as a robot would run its bus driver
#: pid of the virtual bus process :func:`sim_bus_process` runs now (0: none).
_running = 0


def process_cpu(pid: int) -> float:
    """CPU time [s] the process ``pid`` has used so far (Linux /proc); NaN once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sim_cpu() -> float:
    """CPU time [s] the running virtual bus process has used so far; NaN without one."""
    return process_cpu(_running)


def raise_priority(sched: str = "fifo") -> None:
    """Run ahead of the other jobs on the shared machine (needs root; ignored otherwise).

    ``sched`` ``"fifo"``: SCHED_FIFO priority 10, as a robot's bus driver runs (the
    kernel's RT throttling, 95 % by default, keeps the rest of the machine alive; both
    processes block while they wait), else nice :data:`PRIORITY`; ``"nice"``: only the
    nice value; ``"none"``: nothing.
    """
    if sched == "none":
        return
    if sched == "fifo":
        with suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
            return
    with suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)


def scheduling() -> str:
    """How this process is scheduled, for the report."""
    with suppress(OSError, AttributeError):
        if os.sched_getscheduler(0) == os.SCHED_FIFO:
            return "SCHED_FIFO priority 10"
    return f"nice {os.getpriority(os.PRIO_PROCESS, 0)}"


@contextmanager
def sim_bus_process(
    options: list[str], preexec_fn: Callable[[], None] | None = None
) -> Iterator[tuple[str, int]]:
    """Run ``hilbot sim-bus`` with ``options``; yield its ``(port, pid)`` once it serves.

    Args:
        options: the command's options (servos, bit rate, family...).
        preexec_fn: run in the child before it starts (e.g. to set its priority).
    """
    global _running
    args = [sys.executable, "-m", "hilbot", "sim-bus", *options]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().split()[1]
        _running = proc.pid
        yield port, proc.pid
    finally:
        _running = 0
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def sim_bus(
    ids: Iterable[int],
    model: str,
    baud: int,
    *,
    family: str = "dynamixel",
    protocol: int = 2,
    sched: str = "none",
) -> Iterator[tuple[str, int]]:
    """``hilbot sim-bus`` of the servos ``ids``, all of ``model``, Return Delay Time 0.

    Args:
        ids: the servo ids.
        model: their model, e.g. ``"XM430-W350"``.
        baud: the bus's bit rate [bit/s].
        family: ``"dynamixel"`` or ``"feetech"``.
        protocol: the Dynamixel protocol, 1 or 2.
        sched: the child's priority (see :func:`raise_priority`).

    Yields:
        ``(port, pid)`` once it serves.
    """
    options = ["--return-delay", "0", "--baud", str(baud), "--family", family]
    if protocol != 2:
        options += ["--protocol", str(protocol)]
    for i in ids:
        options += ["--servo", f"{i}:{model}"]
    preexec = None if sched == "none" else functools.partial(raise_priority, sched)
    with sim_bus_process(options, preexec_fn=preexec) as served:
        yield served
