"""Feetech buses in robot configs: the family field, model and rate checks, the SO-101 pair."""

from __future__ import annotations

import math

import pytest

from hilbot.driver.runtime.config import load_config, parse_config
from hilbot.driver.runtime.errors import ConfigError
from hilbot.driver.runtime.validation import check_config
from hilbot.hal.errors import CommandError
from hilbot.hal.feetech.session import DYNAMIXEL_ONLY
from hilbot.hal.feetech.tables import (
    FeetechUnits,
    feetech_budget,
    max_cycle_rate,
    model,
    state_block,
)
from hilbot.hal.mapping import BusSpec, ServoSpec

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


def test_so101_follower_is_six_sts3215_on_a_feetech_bus():
    config = load_config("so101_follower")
    assert config.buses[0].family == "feetech"
    assert config.bus_specs()["main"].family == "feetech"
    assert [(s.id, s.model, s.joint) for s in config.servos] == [
        (i + 1, "STS3215", j) for i, j in enumerate(JOINTS)
    ]
    assert config.safety.bus_watchdog is None  # Feetech has none: the config says so


def test_so101_leader_reads_the_same_joints_and_cuts_torque_on_estop():
    leader = load_config("so101_leader")
    assert [s.joint for s in leader.servos] == list(JOINTS)
    assert leader.safety.estop_action.value == "torque_off"


def test_urdf_numbers_are_the_published_ones():
    # TheRobotStudio SO-ARM100, Simulation/SO101/so101_new_calib.urdf: joint limits
    from hilbot.driver.runtime.validation import load_robot

    robot = load_robot(load_config("so101_follower").urdf)
    limits = {j: robot.joints[j].bounds() for j in JOINTS}
    assert limits["shoulder_pan"] == pytest.approx((-1.91986, 1.91986))
    assert limits["elbow_flex"] == pytest.approx((-1.69, 1.69))
    assert limits["gripper"] == pytest.approx((-0.174533, 1.74533))


def _data(**bus):
    config = load_config("so101_follower")
    data = config.model_dump(mode="json", exclude={"teleop"})
    data["buses"][0].update(bus)
    return data


def test_a_feetech_bus_refuses_a_dynamixel_model_naming_the_known_ones():
    data = _data()
    data["servos"][2]["model"] = "XM430-W350"
    with pytest.raises(ConfigError) as info:
        check_config(parse_config(data))
    assert info.value.loc == ("servos", 2, "model")
    assert "STS3215" in str(info.value)


def test_a_dynamixel_bus_refuses_a_feetech_model():
    data = _data(family="dynamixel")
    with pytest.raises(ConfigError) as info:
        check_config(parse_config(data))
    assert info.value.loc == ("servos", 0, "model")


def test_an_unknown_family_fails_at_its_field():
    with pytest.raises(ConfigError) as info:
        parse_config(_data(family="herkulex"))
    assert info.value.loc == ("buses", 0, "family")


def test_a_bus_watchdog_on_an_all_feetech_robot_is_refused():
    data = _data()
    data["safety"]["bus_watchdog"] = 0.5
    with pytest.raises(ConfigError) as info:
        check_config(parse_config(data))
    assert info.value.loc == ("safety", "bus_watchdog")
    assert "no Bus Watchdog" in str(info.value)


def test_a_feetech_baud_rate_the_servos_lack_is_refused():
    with pytest.raises(ConfigError) as info:
        check_config(parse_config(_data(baudrate=2_000_000)))
    assert info.value.loc == ("buses", 0, "baudrate")


def test_a_rate_beyond_the_wire_is_refused():
    data = _data(baudrate=38_400)
    with pytest.raises(ConfigError) as info:
        check_config(parse_config(data))
    assert info.value.loc == ("rate_hz",)


def test_the_cycle_budget_counts_the_bytes_of_both_packets():
    servos = [ServoSpec(i, "STS3215", f"j{i}") for i in range(1, 7)]
    budget = feetech_budget(BusSpec("x", 1_000_000, family="feetech"), servos)
    # sync read 8 + 6 ids, replies 6 x (6 + 8), sync write 8 + 6 x 3
    assert (budget.tx_bytes, budget.rx_bytes) == (14 + 26, 84)
    assert budget.wire_time == pytest.approx(124e-5)
    assert max_cycle_rate(BusSpec("x", family="feetech"), servos) == pytest.approx(1 / 124e-5)
    slow = feetech_budget(BusSpec("x", family="feetech"), servos, return_delay_time=250)
    assert slow.cycle_time == pytest.approx(124e-5 + 6 * 500e-6)
    scs = feetech_budget(BusSpec("x", family="feetech"), [ServoSpec(1, "SCS0009", "j")])
    assert not scs.sync_read and scs.transactions == 2


@pytest.mark.parametrize("name", ["STS3215", "STS3215-12V", "STS3250", "SCS0009"])
def test_every_model_has_the_contiguous_state_block(name):
    assert state_block(model(name))[:2] == (56, 8)


def test_units_round_trip_and_refuse_what_the_servo_cannot_reach():
    unit = FeetechUnits.of(ServoSpec(1, "STS3215", "j", offset=0.1, direction=-1))
    for ticks in (0, 1000, 2048, 4095):
        assert unit.ticks(unit.position(ticks)) == ticks
    assert unit.position(2048) == pytest.approx(0.1)
    assert unit.velocity(100) == pytest.approx(-100 * 2 * math.pi / 4096)
    assert unit.effort(-500) == pytest.approx(50.0)  # 0.1 % per unit, joint's sign
    for bad in (math.nan, math.inf, 4.0, 1e308):
        with pytest.raises(CommandError) as info:
            unit.ticks(bad)
        assert info.value.joint == "j"


@pytest.mark.parametrize("field", DYNAMIXEL_ONLY)
def test_dynamixel_only_servo_settings_are_refused_on_a_feetech_bus(field):
    data = _data()
    data["servos"][5][field] = "current_position" if field == "mode" else 0.3
    with pytest.raises(ConfigError) as info:
        check_config(parse_config(data))
    assert info.value.loc == ("servos", 5, field)
    assert "is written to Dynamixel servos" in str(info.value)


@pytest.mark.parametrize("field", DYNAMIXEL_ONLY)
def test_the_backend_refuses_them_too(field):
    from hilbot.hal.errors import ConfigError as HalConfigError
    from hilbot.hal.feetech.backend import FeetechBackend

    spec = ServoSpec(1, "STS3215", "j", **{field: "position" if field == "mode" else 0.3})
    with pytest.raises(HalConfigError) as info:
        FeetechBackend(BusSpec("x", family="feetech"), [spec])
    assert info.value.field == field
