"""Drop old, repeated and expired messages: ``seq`` per topic and sender, ``stamp``/``ttl``."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from hilbot.driver.teleop.messages import (
    Header,
    MessageRejected,
    Rejection,
    RejectReason,
    number_text,
)


@dataclass(slots=True)
class _Last:
    seq: int
    at: float  # [s], monotonic


class FreshnessFilter:
    """Accept a message only if it is newer than the last one of its stream and not expired.

    A stream is a (topic, sender) pair. Its ``seq`` must grow; a lower or
    repeated one is dropped, unless the stream was silent for ``seq_reset_s``
    (a restarted sender starts again from 0). A message with a ``stamp`` older
    than its ``ttl`` (or ``default_ttl_s``) is dropped, and so is one stamped
    more than ``max_clock_skew_s`` in the future. At most ``max_streams``
    streams are remembered (least recently used first out), so a flood of
    made-up senders cannot grow memory.

    Args:
        default_ttl_s: lifetime [s] of a stamped message without ``ttl``.
        max_clock_skew_s: tolerated sender clock lead [s].
        seq_reset_s: silence [s] after which a stream's ``seq`` may restart.
        max_streams: number of streams remembered.
        wall_clock: Unix time source [s], compared with ``stamp``.
        monotonic: monotonic time source [s].
    """

    def __init__(
        self,
        *,
        default_ttl_s: float,
        max_clock_skew_s: float,
        seq_reset_s: float = 2.0,
        max_streams: int = 256,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._default_ttl = default_ttl_s
        self._skew = max_clock_skew_s
        self._reset = seq_reset_s
        self._max_streams = max_streams
        self._wall = wall_clock
        self._mono = monotonic
        self._streams: OrderedDict[tuple[str, str], _Last] = OrderedDict()

    def __len__(self) -> int:
        return len(self._streams)

    def check(self, topic: str, header: Header) -> None:
        """Record ``header`` as the newest of its stream, or raise.

        Raises:
            MessageRejected: with reason ``expired``, ``future_stamp`` or ``stale_seq``.
        """
        if header.stamp is not None:
            self._check_age(topic, header, header.stamp)
        if header.seq is not None:
            self._check_seq(topic, header, header.seq)

    def _check_age(self, topic: str, header: Header, stamp: float) -> None:
        age = self._wall() - stamp
        ttl = header.ttl if header.ttl is not None else self._default_ttl
        if age < -self._skew:
            raise MessageRejected(
                Rejection(
                    RejectReason.FUTURE_STAMP,
                    f"stamp is {_seconds(-age)} s in the future (tolerance {self._skew} s); "
                    "check the sender's clock",
                    topic,
                    header.seq,
                )
            )
        if age > ttl:
            raise MessageRejected(
                Rejection(
                    RejectReason.EXPIRED,
                    f"message is {_seconds(age)} s old, its ttl is {number_text(ttl)} s",
                    topic,
                    header.seq,
                )
            )

    def _check_seq(self, topic: str, header: Header, seq: int) -> None:
        key = (topic, header.sender)
        now = self._mono()
        last = self._streams.get(key)
        if last is not None and seq <= last.seq and now - last.at < self._reset:
            raise MessageRejected(
                Rejection(
                    RejectReason.STALE_SEQ,
                    f"seq {seq} is not newer than {last.seq}",
                    topic,
                    seq,
                )
            )
        if last is None:
            self._streams[key] = _Last(seq, now)
            if len(self._streams) > self._max_streams:
                self._streams.popitem(last=False)
        else:
            last.seq, last.at = seq, now
            self._streams.move_to_end(key)


def _seconds(value: float) -> str:
    """A time span [s] for a detail: to the millisecond, or in 6 digits when huge."""
    return f"{value:.3f}" if abs(value) < 1e6 else f"{value:.6g}"
