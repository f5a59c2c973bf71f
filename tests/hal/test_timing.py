"""The bus timing budget: the arithmetic the runtime uses to reject impossible rates."""

import pytest

from hilbot.hal.dynamixel.tables import model
from hilbot.hal.dynamixel.timing import (
    ReadMethod,
    bus_budget,
    choose_read_method,
    cycle_budget,
    max_cycle_rate,
    read_bytes,
)
from hilbot.hal.mapping import BusSpec, ServoSpec


def test_six_servos_4_bytes_at_1mbps_is_about_650_hz():
    b = cycle_budget(servos=6, read_length=4, write_length=4, baudrate=1_000_000)
    assert b.tx_bytes == 20 + 44
    assert b.rx_bytes == 90
    assert b.wire_time == pytest.approx(1.54e-3)
    assert b.max_rate == pytest.approx(649.35, abs=0.1)
    assert "649 Hz" in b.describe()


def test_return_delay_is_paid_per_reply_except_in_fast_reads():
    slow = cycle_budget(
        servos=6, read_length=4, write_length=4, baudrate=1_000_000, return_delay_time=250
    )
    assert slow.return_delay == pytest.approx(6 * 500e-6)
    fast = cycle_budget(
        servos=6,
        read_length=4,
        write_length=4,
        baudrate=1_000_000,
        method=ReadMethod.FAST_SYNC_READ,
        return_delay_time=250,
    )
    assert fast.return_delay == pytest.approx(500e-6)
    assert fast.rx_bytes == 8 + 6 * 8


def test_protocol1_sizes():
    assert read_bytes(ReadMethod.READ_EACH, 1, [8, 8]) == (16, 28, 2)
    assert read_bytes(ReadMethod.BULK_READ, 1, [8, 8]) == (13, 28, 2)
    with pytest.raises(ValueError, match=r"1\.0"):
        read_bytes(ReadMethod.SYNC_READ, 1, [8])


def test_read_method_choice():
    x = [model("XM430-W350"), model("XL430-W250")]
    assert choose_read_method(x) is ReadMethod.FAST_SYNC_READ
    assert choose_read_method(x, fast_ok=False) is ReadMethod.SYNC_READ
    assert choose_read_method([model("MX-28"), model("MX-64")]) is ReadMethod.BULK_READ
    assert choose_read_method([model("MX-28"), model("AX-12A")]) is ReadMethod.READ_EACH


def test_max_cycle_rate_for_a_config():
    servos = [ServoSpec(i, "XM430-W350", f"j{i}") for i in range(1, 7)]
    rate = max_cycle_rate(BusSpec("/dev/null", 1_000_000, 2), servos)
    assert 600 < rate < 660
    slow = max_cycle_rate(BusSpec("/dev/null", 57600, 2), servos)
    assert slow == pytest.approx(rate * 57600 / 1_000_000)
    assert max_cycle_rate(BusSpec("x"), []) == float("inf")


def test_protocol_mismatch_is_named():
    with pytest.raises(ValueError, match="servo 1"):
        bus_budget(BusSpec("/dev/ttyUSB0", protocol=1), [ServoSpec(1, "XM430-W350", "a")])
