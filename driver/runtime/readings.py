"""Readings are checked before they are trusted: a joint cannot move faster than physics.

A present position that moved more than the joint's velocity limit allows since the last
trusted reading (times ``PHYSICS_MARGIN``, plus an encoder tolerance) is a *glitch*: an
encoder spike, two bit flips that cancel in an 8-bit checksum, a reply taken for the wrong
servo. :class:`ReadingGuard` counts it per joint and hands the runtime the last trusted
value instead, so a glitch never becomes an entry goal, a hold goal or the motion layer's
state. A reading that the next one confirms (the two agree) was a real move, not a glitch
(the arm pushed while torque is off, a restart): the guard trusts it from then on.

Glitches that repeat on one joint (``fault_count`` within ``fault_window``) are reported so
the runtime can fault the servo by name.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

#: Readings may move this many times the joint's velocity limit before they are glitches
#: (a servo pushed by hand or by gravity with torque off can outrun the URDF's figure).
PHYSICS_MARGIN = 2.0
#: Encoder tolerance [rad] on revolute joints (a few ticks of any 12-bit encoder, and the
#: read-to-read noise of the servos we drive), and [m] on prismatic joints.
REVOLUTE_TOLERANCE = 0.02
PRISMATIC_TOLERANCE = 0.002


class Checked(NamedTuple):
    """A reading after the check.

    Attributes:
        position: (n,) the positions to trust: the reading, with glitched joints replaced
            by their last trusted value.
        glitched: indices of the joints whose reading was a glitch.
        repeated: indices of the joints whose glitches repeated past the fault threshold.
    """

    position: NDArray[np.float64]
    glitched: tuple[int, ...]
    repeated: tuple[int, ...]


class ReadingGuard:
    """Plausibility of every reading against the last trusted one.

    Args:
        names: the joints.
        velocity: (n,) velocity limits [rad/s or m/s] (``inf`` where none).
        tolerance: (n,) encoder tolerance [rad or m].
        fault_count: this many glitches on one joint ...
        fault_window: ... within this long [s] are a fault.
    """

    def __init__(
        self,
        names: tuple[str, ...],
        velocity: NDArray[np.float64],
        tolerance: NDArray[np.float64],
        *,
        fault_count: int = 5,
        fault_window: float = 2.0,
    ) -> None:
        self.names = names
        # an unlimited joint still moves no more than 50 rad/s (the config's own bound)
        self.velocity = np.where(np.isfinite(velocity), velocity, 50.0) * PHYSICS_MARGIN
        self.tolerance = np.asarray(tolerance, dtype=np.float64)
        self.fault_count = fault_count
        self.fault_window = fault_window
        n = len(names)
        self.counts = np.zeros(n, dtype=np.int64)  # glitches per joint since start
        self._trusted: NDArray[np.float64] | None = None
        self._trusted_at = np.zeros(n)  # (n,) when each joint's trusted value was read [s]
        self._candidate: NDArray[np.float64] | None = None  # the last glitched reading
        self._candidate_at = 0.0
        self._recent: list[deque[float]] = [deque(maxlen=fault_count) for _ in range(n)]

    @property
    def total(self) -> int:
        """Glitches counted on every joint."""
        return int(self.counts.sum())

    def allowed(self, elapsed: float | NDArray[np.float64]) -> NDArray[np.float64]:
        """(n,) how far a joint may move in ``elapsed`` seconds [rad or m]."""
        out: NDArray[np.float64] = self.tolerance + self.velocity * np.maximum(elapsed, 0.0)
        return out

    def agree(self, a: NDArray[np.float64], b: NDArray[np.float64], elapsed: float) -> bool:
        """Whether two readings ``elapsed`` apart are consistent with each other."""
        return bool(np.all(np.abs(a - b) <= self.allowed(elapsed)))

    def trust(self, position: NDArray[np.float64], when: float) -> None:
        """Take ``position`` as trusted (readings that agreed, at enable)."""
        self._trusted = np.array(position, dtype=np.float64)
        self._trusted_at[:] = when
        self._candidate = None

    def check(self, position: NDArray[np.float64], when: float) -> Checked:
        """Check a reading taken at ``when`` [s]; the first one is trusted as it is."""
        reading = np.asarray(position, dtype=np.float64)
        if self._trusted is None:
            self.trust(reading, when)
            return Checked(reading, (), ())
        implausible = np.abs(reading - self._trusted) > self.allowed(when - self._trusted_at)
        if not implausible.any():
            self.trust(reading, when)
            return Checked(reading, (), ())
        candidate = self._candidate
        if candidate is not None and self.agree(reading, candidate, when - self._candidate_at):
            # two readings in a row agree: the joint really is there (pushed, restarted)
            self.trust(reading, when)
            return Checked(reading, (), ())
        self._candidate, self._candidate_at = reading.copy(), when
        glitched = tuple(int(j) for j in np.flatnonzero(implausible))
        repeated = []
        for j in glitched:
            self.counts[j] += 1
            recent = self._recent[j]
            recent.append(when)
            if len(recent) == self.fault_count and when - recent[0] <= self.fault_window:
                repeated.append(j)
        trusted = np.where(implausible, self._trusted, reading)
        # the joints that read plausibly are trusted now; the others keep their old value
        self._trusted = trusted
        self._trusted_at = np.where(implausible, self._trusted_at, when)
        return Checked(trusted, glitched, tuple(repeated))
