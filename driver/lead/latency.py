"""Leader read -> follower goal written, for ``hilbot lead`` with the follower in this process.

Each published target is remembered with the time its leader reading ended
(``JointState.timestamp``, monotonic). When the follower's runtime takes a joint target
in, it is matched to its reading by value (the MQTT hop carries the floats exactly); the
follower's next goal write ends that target's latency: the time from the leader read to
the first goal the follower computed with it (its motion layer, safety and watchdog
included). Only this process's clock is used.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import numpy as np

from hilbot.hal.backend import Backend, JointState

#: How many published targets are remembered for matching (a few seconds at 100 Hz).
REMEMBERED = 512
#: How many latencies the summary is taken over (the newest).
KEPT = 10_000


def _key(targets: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(targets.items()))


class LeadLatency:
    """Latencies from leader reads to the follower goals written from them [s]."""

    def __init__(self) -> None:
        self._sent: OrderedDict[tuple[tuple[str, float], ...], float] = OrderedDict()
        self._pending: list[float] = []
        self.samples: deque[float] = deque(maxlen=KEPT)

    def published(self, read_time: float, targets: Mapping[str, float]) -> None:
        """The leader's reading that ended at ``read_time`` was published as ``targets``."""
        self._sent[_key(targets)] = read_time
        if len(self._sent) > REMEMBERED:
            self._sent.popitem(last=False)

    def arrived(self, targets: Mapping[str, float]) -> None:
        """The follower took ``targets`` in; its next goal write is the one they lead to."""
        read_time = self._sent.pop(_key(targets), None)
        if read_time is not None:
            self._pending.append(read_time)

    def written(self, now: float) -> None:
        """The follower wrote a goal at ``now`` (monotonic): the first from the targets taken in."""
        if self._pending:
            self.samples.extend(now - read_time for read_time in self._pending)
            self._pending.clear()

    def summary(self) -> str | None:
        """``leader read -> follower goal M ms median, P ms p99``, or ``None`` without any."""
        if not self.samples:
            return None
        median, p99 = np.percentile(np.fromiter(self.samples, float), [50, 99]) * 1000
        return f"leader read -> follower goal {median:.1f} ms median, {p99:.1f} ms p99"


class TimedWrites:
    """A follower backend whose goal writes are noted in a :class:`LeadLatency`."""

    def __init__(self, inner: Backend, latency: LeadLatency) -> None:
        self._inner = inner
        self._latency = latency

    async def write(self, goals: Mapping[str, float]) -> None:
        """Write the goals, then note the time."""
        await self._inner.write(goals)
        self._latency.written(time.monotonic())

    async def read(self) -> JointState:
        """The backend's reading."""
        return await self._inner.read()

    async def __aenter__(self) -> TimedWrites:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._inner.__aexit__(kind, exc, tb)

    def __getattr__(self, name: str) -> Any:  # everything else is the backend's
        return getattr(self._inner, name)
