"""Fixtures: the real DynamixelBackend against the virtual Dynamixel bus on a pty."""

import contextlib

import pytest

from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim import running_virtual_bus

# The machine running the tests is shared and busy: allow replies to be late by
# this much before calling them lost (real hardware uses the 3 ms default).
TEST_MARGIN_MS = 100.0


def _chain(model: str, n: int = 3, first_id: int = 1) -> list[ServoSpec]:
    return [ServoSpec(first_id + i, model, f"j{first_id + i}") for i in range(n)]


@pytest.fixture
def open_bus():
    """``open_bus(servos, protocol=2, **bus_kw)`` starts a virtual bus, torn down after."""
    with contextlib.ExitStack() as stack:

        def start(servos, protocol=2, baudrate=1_000_000, **kw):
            kw.setdefault("return_delay_time", 0)
            return stack.enter_context(
                running_virtual_bus(servos, protocol=protocol, baudrate=baudrate, **kw)
            )

        yield start


def _backend_for(vbus, servos, protocol=2, baudrate=1_000_000, **kw):
    kw.setdefault("margin_ms", TEST_MARGIN_MS)
    return DynamixelBackend(BusSpec(vbus.port, baudrate, protocol), servos, **kw)


@pytest.fixture
def backend_for():
    """``backend_for(vbus, servos, protocol=2, **kw)``: a DynamixelBackend on ``vbus``."""
    return _backend_for


@pytest.fixture
def chain():
    """``chain(model, n, first_id=1)``: n servos of one model on joints j<id>."""
    return _chain
