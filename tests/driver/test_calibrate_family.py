"""hilbot calibrate picks a bus's servo family in one place, for --demo and the hardware path."""

from __future__ import annotations

import pytest

from hilbot.driver.commands.calibrate import _family, _real_access
from hilbot.driver.runtime.backends import virtual_margin_ms
from hilbot.driver.runtime.config import load_config


@pytest.mark.parametrize("robot", ["koch_v1_1_follower", "so101_follower"], ids=["dxl", "sts"])
def test_the_demo_bus_and_both_accesses_are_of_the_configs_family(robot: str) -> None:
    config = load_config(robot)
    bus = config.buses[0]
    servos = config.servo_specs()
    family = _family(bus)
    margin = {"margin_ms": virtual_margin_ms()}
    with family.virtual_bus(servos, dict(config.home)) as vbus:
        # the --demo path: the family's access on its own virtual bus
        with family.access(vbus.port, servos, margin) as access:
            for s in servos:  # a Feetech model number names a series: "STS3215/STS3215-12V"
                assert s.model in (access.model_of(s.id) or "").split("/"), s.id
            demo = type(access)
        # the hardware path: the config's bus (here the virtual one) through the same switch
        wired = bus.model_copy(update={"port": vbus.port, "reply_margin_ms": margin["margin_ms"]})
        real = config.model_copy(update={"buses": (wired,)})
        with _real_access(real, vbus.port) as access:
            assert type(access) is demo
            assert set(access.present_ticks([s.id for s in servos])) == {s.id for s in servos}
    assert demo.__name__.startswith({"dynamixel": "Dynamixel", "feetech": "Feetech"}[bus.family])
