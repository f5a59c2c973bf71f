"""Glue for ``hilbot sim-bus --hand/--mount``: mounted servos and a running hand."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence

from hilbot.hal.mapping import ServoSpec
from hilbot.sim.hand import Hand, HandBus, Pose, motion_named
from hilbot.sim.mounting import mounted, parse_mounting


def mounted_servos(servos: Sequence[ServoSpec], mounts: Sequence[str]) -> tuple[ServoSpec, ...]:
    """``servos`` with the ``--mount ID:DEG[:reversed]`` errors of those on this bus.

    Raises:
        ValueError: a malformed ``--mount`` (one naming a servo of another bus is skipped;
            ``hilbot sim-bus`` refuses one that names no served servo).
    """
    parsed = dict(parse_mounting(text) for text in mounts)
    ids = {s.id for s in servos}
    return mounted(servos, {i: m for i, m in parsed.items() if i in ids})


def check_mount_ids(mounts: Sequence[str], ids: Sequence[int], where: str = "the bus") -> None:
    """Refuse a ``--mount`` naming a servo that is not among ``ids`` (those on ``where``).

    Raises:
        ValueError: a malformed ``--mount``, or one naming no servo of ``ids``.
    """
    for text in mounts:
        servo, _ = parse_mounting(text)
        if servo not in ids:
            known = ", ".join(str(i) for i in sorted(ids))
            raise ValueError(f"--mount {text!r}: no servo {servo} on {where} (ids {known})")


@contextlib.contextmanager
def hand_on(
    bus: HandBus,
    servos: Sequence[ServoSpec],
    motion: str,
    ranges: Mapping[str, tuple[float, float]],
    center: Pose,
    *,
    begin: threading.Event | None = None,
    delay: float = 0.0,
) -> Iterator[Hand]:
    """A hand playing the named motion on ``bus`` until the context ends.

    ``sweep`` sweeps once and then holds; ``wave`` waves about ``center`` (clipped to the
    ranges) until the end. The motion starts ``delay`` seconds after ``begin`` is set (a
    virtual bus's ``first_packet``: when a client first talks on the port), or after
    ``delay`` seconds from now without ``begin``.
    """
    joints = {s.joint for s in servos}
    ranges = {j: r for j, r in ranges.items() if j in joints}
    middle = {j: min(max(center.get(j, 0.5 * (lo + hi)), lo), hi) for j, (lo, hi) in ranges.items()}
    chosen = motion_named(motion, ranges, middle)
    with Hand(bus, servos) as hand:
        if begin is None and delay <= 0:
            hand.play(chosen)
            yield hand
            return
        ended = threading.Event()

        def later() -> None:
            if begin is not None:
                while not begin.wait(0.1):
                    if ended.is_set():
                        return
            if not ended.wait(delay):
                hand.play(chosen)

        waiter = threading.Thread(target=later, name="virtual-hand-start", daemon=True)
        waiter.start()
        try:
            yield hand
        finally:
            ended.set()
            waiter.join(timeout=5.0)
