"""How a virtual servo is really mounted: the assembly errors calibration has to find.

A robot config says how each servo relates to its joint (``ServoSpec.offset`` and
``direction``). A real arm is assembled by hand: a horn put on one spline off, a servo
turned around. ``Mounting`` describes that error for one virtual servo, and
:func:`mounted` gives the servo specs of the arm as it really is, which the virtual bus
(initial positions) and the scripted hand (joint -> shaft) use. The driver keeps using
the config's specs, so it sees the error exactly as it would on hardware.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hilbot.hal.mapping import ServoSpec


@dataclass(frozen=True, slots=True)
class Mounting:
    """An assembly error of one servo.

    Args:
        offset: how far off the horn sits [rad of joint]: the joint is at the config's
            position plus this when the servo reads what the config expects.
        reversed: the servo turns opposite to what the config's direction says.
    """

    offset: float = 0.0
    reversed: bool = False

    def __post_init__(self) -> None:
        if not math.isfinite(self.offset):
            raise ValueError(f"a mounting offset must be finite, got {self.offset!r}")


def parse_mounting(text: str) -> tuple[int, Mounting]:
    """Parse ``ID:DEGREES[:reversed]`` (the ``--mount`` option), e.g. ``3:20:reversed``.

    Raises:
        ValueError: naming what was wrong.
    """
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0].strip().isdigit():
        raise ValueError(f"--mount {text!r}: expected ID:DEGREES[:reversed], e.g. 3:20:reversed")
    try:
        degrees = float(parts[1])
    except ValueError:
        raise ValueError(f"--mount {text!r}: {parts[1]!r} is not a number of degrees") from None
    if not math.isfinite(degrees) or abs(degrees) > 360.0:
        raise ValueError(f"--mount {text!r}: degrees must be finite, within ±360")
    flag = parts[2].strip().lower() if len(parts) == 3 else ""
    if flag not in ("", "reversed"):
        raise ValueError(f"--mount {text!r}: the third field can only be 'reversed'")
    return int(parts[0]), Mounting(math.radians(degrees), flag == "reversed")


def mounted(specs: Sequence[ServoSpec], mountings: Mapping[int, Mounting]) -> tuple[ServoSpec, ...]:
    """The specs of the arm as assembled: each config spec with its mounting error.

    Raises:
        ValueError: a mounting names a servo id that is not among ``specs``.
    """
    unknown = sorted(set(mountings) - {s.id for s in specs})
    if unknown:
        raise ValueError(f"mountings name servos that are not configured: {unknown}")
    out = []
    for spec in specs:
        m = mountings.get(spec.id)
        if m is None:
            out.append(spec)
            continue
        out.append(
            dataclasses.replace(
                spec,
                offset=spec.offset + m.offset,
                direction=-spec.direction if m.reversed else spec.direction,
            )
        )
    return tuple(out)
