"""Glue for ``hilbot sim-bus --hand/--mount``: mounted servos and a running hand."""

from __future__ import annotations

import contextlib
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
) -> Iterator[Hand]:
    """A hand playing the named motion on ``bus`` until the context ends.

    ``sweep`` sweeps once and then holds; ``wave`` waves about ``center`` (clipped to the
    ranges) until the end.
    """
    joints = {s.joint for s in servos}
    ranges = {j: r for j, r in ranges.items() if j in joints}
    middle = {j: min(max(center.get(j, 0.5 * (lo + hi)), lo), hi) for j, (lo, hi) in ranges.items()}
    with Hand(bus, servos) as hand:
        hand.play(motion_named(motion, ranges, middle))
        yield hand
