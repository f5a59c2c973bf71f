"""What the two virtual buses share through ``hilbot.sim.pty_server``."""

from __future__ import annotations

import pytest

from hilbot.hal.errors import ConfigError
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.virtual_bus import FeetechVirtualBus, VirtualBus


def test_both_buses_refuse_power_up_positions_of_servos_not_on_the_bus():
    with pytest.raises(ConfigError, match=r"not on the bus: \[7\]"):
        VirtualBus({1: "XM430-W350"}, initial_positions={7: 2048})
    with pytest.raises(ConfigError, match=r"not on the bus: \[7\]"):
        FeetechVirtualBus({1: "STS3215"}, initial_positions={7: 2048})


def test_both_buses_refuse_a_duplicate_id_naming_it():
    twice = [ServoSpec(1, "XM430-W350", "a"), ServoSpec(1, "XM430-W350", "b")]
    with pytest.raises(ConfigError, match="servo id 1 appears twice") as dxl:
        VirtualBus(twice)
    with pytest.raises(ConfigError, match="servo id 1 appears twice") as ft:
        FeetechVirtualBus([(1, "STS3215"), (1, "STS3215")])
    assert dxl.value.servo_id == ft.value.servo_id == 1


def test_power_up_positions_are_ticks_from_the_center_on_both_buses():
    dxl = VirtualBus({1: "XM430-W350", 2: "XM430-W350"}, initial_positions={2: 2048 + 1024})
    ft = FeetechVirtualBus({1: "STS3215", 2: "STS3215"}, initial_positions={2: 2048 - 1024})
    assert dxl.model.position.tolist() == pytest.approx(
        [0.0, 1024 * dxl.servo(2).spec.radians_per_tick]
    )
    assert ft.model.position.tolist() == pytest.approx(
        [0.0, -1024 * ft.servo(2).spec.radians_per_tick]
    )
