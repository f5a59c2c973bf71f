"""Reply deadlines for virtual buses, taken from how late this host wakes threads right now.

A virtual bus's servos share the host's CPUs with the backend that drives them, so a
reply can be late by however long the scheduler keeps a thread waiting: on an idle
2-core machine below 1 ms, with two CPU-bound processes beside it 5 to 25 ms (measured
while fixing issue 11, when a fixed 20 ms margin made start-up reads time out). A real
bus has no such delay; its margin stays the backend's default.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from types import TracebackType
from typing import Any

from hilbot._compat import Self

#: [ms] the least reply margin on a virtual bus (a scheduler tick or two on a busy host).
VIRTUAL_MARGIN_MS = 20.0
#: Retries of a failed virtual-bus transaction: a stall can outlast one retry, whose late
#: reply then garbles the next.
VIRTUAL_RETRIES = 2
#: Thread wake-ups in one virtual-bus round trip, each of which a busy host can delay by a
#: scheduling stall: the bus server thread wakes on the request and takes the GIL, then the
#: backend's worker thread wakes on the reply and takes the GIL back.
ROUND_TRIP_WAKEUPS = 4
PROBE_TIME = 0.25  # [s] spent measuring the host's scheduling stalls
PROBE_SLEEP = 0.001  # [s] one probe: how late does a thread wake from this sleep?


def scheduling_stall_ms(duration: float = PROBE_TIME) -> float:
    """The worst delay [ms] beyond a 1 ms sleep seen in ``duration`` seconds, on this host now."""
    worst = 0.0
    end = time.perf_counter() + duration
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        time.sleep(PROBE_SLEEP)
        worst = max(worst, time.perf_counter() - t0 - PROBE_SLEEP)
    return worst * 1e3


def run_queue_wait(thread: int | None = None) -> float | None:
    """The time [s] a thread of this process has spent runnable but waiting for a CPU.

    The kernel's own count (``/proc/self/task/TID/schedstat``, Linux) of what the host
    imposed on ``thread`` (a native id; None: the calling thread): its neighbours' CPU
    use, never its own work, which :class:`StallMonitor`'s wake-ups would also count
    (its thread waits for the GIL that the others hold). A thread that needs the CPU
    feels a busy host more than a sleeping probe does (on a 2-core machine with two
    CPU-bound processes and more beside them, a probe's wake-ups were late 12-19 % of
    the time while a control loop's thread waited 50-70 %). None where not counted.
    """
    tid = threading.get_native_id() if thread is None else thread
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class StallMonitor:
    """The host's worst scheduling stall [ms] while a block runs, seen by a watching thread.

    ``with StallMonitor() as watch: ...`` then ``watch.worst_ms``: how much later than asked
    a thread of this process woke (from :data:`PROBE_SLEEP` sleeps) during the block. A
    reply that came later than its deadline while this was large was the host's doing
    (``hilbot doctor`` tells it from a servo's fault this way), not the wire's.
    """

    def __init__(self) -> None:
        self.worst_ms = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-monitor", daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()
            time.sleep(PROBE_SLEEP)
            late = (time.perf_counter() - t0 - PROBE_SLEEP) * 1e3
            self.worst_ms = max(self.worst_ms, late)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()


#: [s] ``safety.bus_watchdog``'s default in a robot config (a test pins the two together).
DEFAULT_BUS_WATCHDOG = 0.5


def virtual_margin_ms(
    bus_watchdog: float | None = DEFAULT_BUS_WATCHDOG,
    retries: int = VIRTUAL_RETRIES,
    *,
    stall_ms: float | None = None,
) -> float:
    """Reply deadline margin [ms] for a virtual bus on this host.

    At least :data:`VIRTUAL_MARGIN_MS`; :data:`ROUND_TRIP_WAKEUPS` stalls as measured now
    (``stall_ms``, measured here when None); at most half of what the servos' Bus
    Watchdog (``bus_watchdog`` [s], None = off) allows a failing read with its retries,
    so that a lost reply never starves the watchdog.
    """
    stall = scheduling_stall_ms() if stall_ms is None else stall_ms
    cap = math.inf if bus_watchdog is None else 0.5 * bus_watchdog * 1e3 / (retries + 1)
    return min(max(VIRTUAL_MARGIN_MS, ROUND_TRIP_WAKEUPS * stall), cap)


async def virtual_options(bus_watchdog: float | None) -> dict[str, Any]:
    """``margin_ms`` and ``retries`` for a backend on a virtual bus, measured off the loop."""
    stall = await asyncio.to_thread(scheduling_stall_ms)
    return {
        "margin_ms": virtual_margin_ms(bus_watchdog, VIRTUAL_RETRIES, stall_ms=stall),
        "retries": VIRTUAL_RETRIES,
    }
