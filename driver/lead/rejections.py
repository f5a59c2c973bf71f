"""What the follower says of the leader's targets: the first rejection's reason, and a count.

The follower publishes each message it rejects on its ``error`` topic (reason, detail,
topic, seq and ``rejected_total``, its count of every rejection so far), at most 50 a
second; beyond that they are only counted, in ``rejected_total`` and in ``state.teleop``.
So the count here is the follower's own counter since the leader's first rejection,
at least the rejections seen one by one and at most the targets sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from hilbot.driver.teleop.publisher import TeleopPublisher


class Rejected(NamedTuple):
    """One rejection the follower published on its ``error`` topic."""

    reason: str
    detail: str
    seq: int


#: Called once, with the first of the leader's targets the follower rejected.
OnFirst = Callable[[Rejected], None]


class FollowerRejections:
    """Follows a follower's rejections of the joint targets one leader publishes.

    Call :meth:`update` with the number of targets sent so far (each cycle: it only
    looks at what arrived since the last call), and :meth:`settle` once the leader
    stopped, so the count covers the last targets too.

    Args:
        publisher: the leader's publisher, which follows the follower's ``error`` and
            ``state`` topics.
        on_first: told of the first rejection (a warning for the terminal).
    """

    def __init__(self, publisher: TeleopPublisher, on_first: OnFirst | None = None) -> None:
        self._publisher = publisher
        self._topic = publisher.topics.joints
        self._on_first = on_first
        self.first: Rejected | None = None
        self._seen = 0  # error payloads naming one of this leader's targets
        self._baseline: int | None = None  # the follower's rejected_total before the first
        self._total: int | None = None  # the newest rejected_total it reported
        self._last: object = None  # the newest error payload looked at

    def update(self, sent: int) -> None:
        """Take in the follower's errors that arrived since the last call.

        Args:
            sent: targets published so far (their ``seq`` run from 1 to ``sent``).
        """
        for error in self._new_errors():
            total = error.get("rejected_total")
            if isinstance(total, int):
                self._total = max(total, self._total or 0)
            seq = error.get("seq")
            if error.get("topic") != self._topic or not isinstance(seq, int):
                continue
            if not 1 <= seq <= sent:
                continue
            self._seen += 1
            if self.first is None:
                self.first = Rejected(str(error.get("reason")), str(error.get("detail")), seq)
                if isinstance(total, int):
                    self._baseline = total - 1
                if self._on_first is not None:
                    self._on_first(self.first)

    def count(self, sent: int) -> int:
        """How many of the ``sent`` targets the follower rejected."""
        self.update(sent)
        state_total = _state_total(self._publisher.state)
        totals = [t for t in (self._total, state_total) if t is not None]
        if self._baseline is None or not totals:
            return self._seen
        return max(self._seen, min(sent, max(totals) - self._baseline))

    async def settle(self, sent: int, timeout: float = 1.0) -> None:
        """After a rejection, wait (at most ``timeout`` [s]) for the follower's counters to rest.

        They rest when two ``state`` messages in a row, both newer than this call, carry
        the same ``received`` and ``rejected_total``: the follower has dealt with every
        target sent. Without a rejection there is nothing to wait for.
        """
        self.update(sent)
        if self.first is None:
            return
        states: list[object] = [self._publisher.state]
        counters: list[tuple[Any, Any]] = []

        def rested(publisher: TeleopPublisher) -> bool:
            if publisher.state is not states[-1]:
                states.append(publisher.state)
                counters.append(_counters(publisher.state))
            return len(counters) >= 2 and counters[-1] == counters[-2]

        with contextlib.suppress(TimeoutError):  # a follower gone or busy: count what came
            await self._publisher.wait_until(rested, timeout)
        self.update(sent)

    def _new_errors(self) -> Sequence[Mapping[str, Any]]:
        errors = self._publisher.errors  # the newest thousand, oldest first
        start = 0
        for index in range(len(errors) - 1, -1, -1):
            if errors[index] is self._last:
                start = index + 1
                break
        if errors:
            self._last = errors[-1]
        new = errors[start:]
        return [e for e in new if isinstance(e, Mapping)]


def _teleop(state: object) -> Mapping[str, Any]:
    teleop = state.get("teleop") if isinstance(state, Mapping) else None
    return teleop if isinstance(teleop, Mapping) else {}


def _state_total(state: object) -> int | None:
    total = _teleop(state).get("rejected_total")
    return total if isinstance(total, int) else None


def _counters(state: object) -> tuple[Any, Any]:
    teleop = _teleop(state)
    return teleop.get("received"), teleop.get("rejected_total")
