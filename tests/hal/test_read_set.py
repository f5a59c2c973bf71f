"""The cycle's read set, through the real backend on the virtual bus."""

import math

import numpy as np
import pytest
import yaml

from hilbot.configs import config_path
from hilbot.driver.runtime.backends import dynamixel_backend, virtual_margin_ms
from hilbot.driver.runtime.config import parse_config
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.dynamixel.timing import ReadMethod, ReadSet, max_cycle_rate
from hilbot.hal.mapping import BusSpec
from hilbot.sim import running_virtual_bus


async def test_protocol1_reads_position_only_by_default_and_keeps_the_error_bits(
    open_bus, backend_for, chain
):
    servos = chain("AX-12A", 3)
    vbus = open_bus(servos, protocol=1, initial_positions={1: 612, 2: 512, 3: 412})
    async with backend_for(vbus, servos, protocol=1) as arm:
        assert arm.layout.read_set is ReadSet.POSITION
        assert arm.method is ReadMethod.READ_EACH
        assert arm.layout.reads() == [(1, 36, 2), (2, 36, 2), (3, 36, 2)]
        state = await arm.read()
        step = 2 * math.pi / (1024 * 360 / 300)
        np.testing.assert_allclose(state.position, [100 * step, 0.0, -100 * step], atol=1e-9)
        assert np.all(np.isnan(state.velocity)) and np.all(np.isnan(state.effort))
        assert np.all(np.isfinite(state.temperature))  # from the slow read
        # the hardware-error bits come with every 1.0 status, whatever is read
        vbus.raise_hardware_error(2, HardwareErrorFlags.OVERHEATING)
        state = await arm.read()
        assert state.faults == {"j2": HardwareErrorFlags.OVERHEATING}


@pytest.mark.parametrize(
    ("protocol", "model", "read", "span", "velocity", "effort"),
    [
        (1, "AX-12A", "position+velocity+effort", (36, 6), True, True),
        (2, "XM430-W350", "position", (132, 4), False, False),
        (2, "XM430-W350", "position+velocity", (128, 8), True, False),
    ],
)
async def test_a_chosen_read_set_reads_its_span(
    open_bus, backend_for, chain, protocol, model, read, span, velocity, effort
):
    servos = chain(model, 2)
    vbus = open_bus(servos, protocol=protocol)
    async with backend_for(vbus, servos, protocol=protocol, read=read) as arm:
        assert arm.layout.reads() == [(1, *span), (2, *span)]
        state = await arm.read()
        assert np.all(np.isfinite(state.position))
        assert np.all(np.isfinite(state.velocity)) == velocity
        assert np.all(np.isfinite(state.effort)) == effort
        assert np.all(np.isfinite(state.temperature))


def _config(read: str | None):
    path = config_path("openmanipulator_x")
    data = yaml.safe_load(path.read_text())
    data["urdf"] = str(path.parent / data["urdf"])
    if read is not None:
        data["buses"][0]["read"] = read
    return parse_config(data)


async def test_the_config_read_option_reaches_the_backend_and_the_rate_check():
    config = _config("position")
    specs = config.servo_specs()
    bus = config.buses[0]
    assert max_cycle_rate(BusSpec("x"), specs, read="position") > max_cycle_rate(
        BusSpec("x"), specs
    )
    async with running_virtual_bus(specs, initial_positions=dict(config.home)) as vbus:
        backend = dynamixel_backend(config, {bus.name: vbus.port}, margin_ms=virtual_margin_ms())
        async with backend as arm:
            assert arm.layout.read_set is ReadSet.POSITION
            state = await arm.read()
            assert np.all(np.isnan(state.velocity))


def test_an_unknown_read_set_in_the_config_is_refused_with_its_path():
    from hilbot.driver.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="read"):
        _config("positions")
