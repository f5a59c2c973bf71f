"""Servos plugged in one at a time on a running virtual bus, as in ``lerobot-setup-motors``.

Setting up a new arm, a person connects one servo straight from the box (id 1, the
factory bit rate), gives it its id and bit rate, unplugs it and connects the next.
:class:`PlugIn` does that on a virtual bus: every servo starts factory-fresh and only
one is on the wire. Once the host has written the plugged servo's ID and Baud Rate
(LeRobot's ``setup_motor`` writes both), the next broadcast PING (the start of the next
servo's search) finds the next servo plugged in instead; :meth:`PlugIn.advance` (Enter
at ``hilbot sim-bus --plug-in-one-at-a-time``) moves on without waiting. After the last
servo is set up every servo is connected, as on the assembled arm.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

BROADCAST_ID = 0xFE  # both families
PING = 0x01  # both families


class PluggableServo(Protocol):
    """What plugging servos in needs of a simulated servo."""

    @property
    def id(self) -> int:
        """The id it answers to now."""
        ...

    @property
    def baudrate(self) -> int | None:
        """The bit rate it listens at now [bit/s]."""
        ...

    def factory_fresh(self) -> None:
        """Every register at its factory value (id 1, factory bit rate), then power up."""
        ...

    def setting_addresses(self) -> tuple[range, range]:
        """The bytes of its ID register and of its Baud Rate register."""
        ...


class PluggableBus(Protocol):
    """What plugging servos in needs of a virtual bus."""

    @property
    def lock(self) -> threading.RLock:
        """The bus's lock (held while a packet is answered)."""
        ...

    def connect(self, slots: Sequence[int]) -> None:
        """Put exactly the servos of ``slots`` on the wire."""
        ...


class PlugIn:
    """Factory servos plugged in one at a time.

    Args:
        bus: the virtual bus (not necessarily running yet).
        servos: the bus's servos, in slot order.
        order: the slots in the order they are plugged in (LeRobot sets up the last
            motor first: the default is the bus's order reversed).
        labels: a name per slot for the messages (e.g. its joint).
        report: where the messages go (``hilbot sim-bus`` prints them).
    """

    def __init__(
        self,
        bus: PluggableBus,
        servos: Sequence[PluggableServo],
        *,
        order: Sequence[int] | None = None,
        labels: Sequence[str] | None = None,
        report: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.bus = bus
        self.servos = list(servos)
        self.order = list(reversed(range(len(self.servos))) if order is None else order)
        if sorted(self.order) != list(range(len(self.servos))):
            raise ValueError(f"plug-in order {self.order} is not every slot once")
        self.labels = (
            list(labels) if labels is not None else [f"slot {k + 1}" for k in range(len(servos))]
        )
        self.report = report
        self.step = -1  # index in ``order`` of the plugged servo; len(order): all connected
        self._id_written = self._baud_written = False
        #: Set once every servo is connected (the sequence is over).
        self.finished = threading.Event()

    @property
    def slot(self) -> int | None:
        """The slot plugged in now, ``None`` once all are connected."""
        return self.order[self.step] if 0 <= self.step < len(self.order) else None

    @property
    def configured(self) -> bool:
        """Whether the host has written the plugged servo's ID and Baud Rate."""
        return self._id_written and self._baud_written

    def begin(self) -> None:
        """Every servo factory-fresh and unplugged; the first one plugged in."""
        with self.bus.lock:
            for servo in self.servos:
                servo.factory_fresh()
            self.step = -1
            self._plug_next()

    def advance(self) -> None:
        """Unplug the servo on the wire and plug in the next (Enter)."""
        with self.bus.lock:
            if self.slot is not None:
                self._plug_next()

    def before(self, target: int, instruction: int) -> None:
        """A packet for ``target`` arrived: a broadcast PING after a setup plugs the next."""
        if target == BROADCAST_ID and instruction == PING and self.configured:
            self._plug_next()

    def after_write(self, address: int, length: int) -> None:
        """The host wrote ``length`` bytes at ``address`` of the plugged servo."""
        slot = self.slot
        if slot is None:
            return
        written = range(address, address + length)
        id_bytes, baud_bytes = self.servos[slot].setting_addresses()
        # The write of ID went to the servo's old id; it answers to its new one after.
        self._id_written |= bool(set(written) & set(id_bytes))
        self._baud_written |= bool(set(written) & set(baud_bytes))
        if not self.configured:
            return
        servo = self.servos[slot]
        done = f"{self.labels[slot]} is set up: id {servo.id} at {servo.baudrate} bit/s"
        if self.step + 1 < len(self.order):
            self.report(f"{done}; the next search (a broadcast ping) or Enter plugs in the next")
        else:
            self.report(done)
            self._plug_next()  # the last one: the arm is assembled

    def _plug_next(self) -> None:
        self.step += 1
        self._id_written = self._baud_written = False
        slot = self.slot
        if slot is None:
            self.bus.connect(range(len(self.servos)))
            self.report("every servo is connected (the assembled arm)")
            self.finished.set()
            return
        self.bus.connect([slot])
        servo = self.servos[slot]
        self.report(
            f"plugged in: {self.labels[slot]} ({self.step + 1} of {len(self.order)}), a factory "
            f"servo: id {servo.id} at {servo.baudrate} bit/s"
        )
