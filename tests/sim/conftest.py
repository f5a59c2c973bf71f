"""Fixtures of the simulation tests: a manual clock, virtual buses and SDK handles on them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from dynamixel_sdk import PacketHandler, PortHandler, port_handler

from hilbot.sim import running_virtual_bus
from hilbot.sim.virtual_bus import VirtualBus


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, dt: float) -> None:
        self.now += dt


@dataclass
class Sdk:
    """dynamixel-sdk's own port and packet handlers, opened on a virtual bus."""

    bus: VirtualBus
    port: PortHandler
    packet: PacketHandler


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(autouse=True)
def patient_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give the stock SDK's reply timeout room for a heavily shared CI machine.

    dynamixel-sdk waits ``2 * LATENCY_TIMER + 2`` ms (+ wire time) for a status packet,
    34 ms by default; on 2 cores shared by a dozen busy processes the server thread
    is sometimes not scheduled that soon. Timeouts still happen, they only take longer.
    """
    monkeypatch.setattr(port_handler, "LATENCY_TIMER", 40)


def open_sdk(bus: VirtualBus, protocol: int, baudrate: int) -> Sdk:
    port = PortHandler(bus.port)
    assert port.openPort()
    assert port.setBaudRate(baudrate)
    return Sdk(bus, port, PacketHandler(float(protocol)))


@pytest.fixture
def sdk_on() -> Callable[[VirtualBus, int, int], Sdk]:
    """``sdk_on(bus, protocol, baudrate)`` opens the SDK's handlers on a running bus."""
    return open_sdk


P2_SERVOS = {1: "XM430-W350", 2: "XM430-W350", 3: "XL430-W250"}
P1_SERVOS = {1: "AX-12A", 2: "MX-28", 3: "MX-64"}


@pytest.fixture
def p2() -> Iterator[Sdk]:
    """Three Protocol 2.0 servos (two with current sensing, one with load) at 1 Mbps."""
    with running_virtual_bus(P2_SERVOS, return_delay_time=0) as bus:
        sdk = open_sdk(bus, 2, 1_000_000)
        yield sdk
        sdk.port.closePort()
        assert bus.errors == []


@pytest.fixture
def p1() -> Iterator[Sdk]:
    """An AX-12A, an MX-28 and an MX-64 on Protocol 1.0 at 1 Mbps."""
    with running_virtual_bus(P1_SERVOS, protocol=1, return_delay_time=0) as bus:
        sdk = open_sdk(bus, 1, 1_000_000)
        yield sdk
        sdk.port.closePort()
        assert bus.errors == []
