"""The operator lease: one sender at a time moves and commands a robot, sans I/O.

The first sender whose target or command is accepted while nobody holds the
lease takes it (arming over MQTT is the usual way: the sender of ``enable``
holds it). Its targets and commands pass; every other sender's are refused
with the reason ``not_lease_holder``, except ``estop``, which anyone
authorised may send. The lease ends when its holder sends ``disable`` or
``release``, or stays silent for ``timeout_s`` (the robot's watchdog timeout).

``sender`` is what each message says it is: the lease keeps two operators from
fighting over one arm by accident. Who may publish at all is the broker's
login and ACLs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Lease timeout [s] of a robot whose target watchdog is off.
DEFAULT_TIMEOUT_S = 0.5


class Lease:
    """Who holds a robot's lease, and since when it was last heard from.

    Args:
        timeout_s: the holder's silence [s] after which the lease ends.
        clock: monotonic time source [s].
    """

    def __init__(
        self, timeout_s: float = DEFAULT_TIMEOUT_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not timeout_s > 0.0:
            raise ValueError(f"the lease timeout must be > 0 s, got {timeout_s}")
        self.timeout_s = timeout_s
        self._clock = clock
        self._holder: str | None = None
        self._heard = 0.0

    @property
    def holder(self) -> str | None:
        """The sender holding the lease, or None (also once its holder fell silent)."""
        if self._holder is not None and self._clock() - self._heard > self.timeout_s:
            self._holder = None
        return self._holder

    def admit(self, sender: str) -> bool:
        """Whether ``sender`` may act now; a free lease goes to it, the holder's is renewed."""
        holder = self.holder
        if holder is not None and holder != sender:
            return False
        self._holder = sender
        self._heard = self._clock()
        return True

    def end(self, sender: str) -> bool:
        """End the lease if ``sender`` holds it (``disable``, ``release``); whether it did."""
        if self.holder != sender:
            return False
        self._holder = None
        return True

    def refusal(self, sender: str) -> str:
        """Why ``sender`` is refused: one line naming the holder and how the lease ends."""
        return (
            f"the robot is leased to sender {self.holder!r}, not {sender!r}: it ends when "
            f"that sender sends 'disable' or 'release', or is silent for {self.timeout_s:g} s; "
            "'estop' is accepted from anyone"
        )
