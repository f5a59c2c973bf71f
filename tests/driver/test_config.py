"""Robot configs: every shipped config loads; every bad config fails at load with its field path."""

from __future__ import annotations

import copy

import pytest

from hilbot.configs import config_path, robot_names
from hilbot.driver.runtime.config import EstopAction, load_config, parse_config
from hilbot.driver.runtime.errors import ConfigError

SHIPPED = (
    "openmanipulator_x",
    "widowx_250s",
    "koch_v1_1_follower",
    "koch_v1_1_leader",
    "hexapod",
    "bimanual",
    "so101_follower",
    "so101_leader",
)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_loads(name):
    config = load_config(name)
    assert config.name == name
    assert config.urdf.is_file()
    assert set(config.home) <= set(config.joint_names)
    assert config.servo_specs()


def test_every_shipped_robot_is_tested():
    assert set(robot_names()) == set(SHIPPED)


def test_load_by_path_equals_load_by_name():
    assert load_config(config_path("openmanipulator_x")) == load_config("openmanipulator_x")


def test_real_servo_ids_and_models():
    om = load_config("openmanipulator_x")
    assert [(s.id, s.model) for s in om.servos] == [(i, "XM430-W350") for i in range(11, 16)]
    assert om.buses[0].baudrate == 1_000_000
    wx = load_config("widowx_250s")
    assert [s.id for s in wx.servos] == list(range(1, 10))
    shadows = {s.id: (s.shadow_of, s.joint) for s in wx.servos if s.shadow_of is not None}
    assert shadows == {3: (2, "shoulder"), 5: (4, "elbow")}
    assert len(wx.joint_names) == 7
    # Interbotix wx250s: XM430-W350 up to the wrist angle, XL430-W250 wrist rotate and gripper.
    assert [s.model for s in wx.servos] == ["XM430-W350"] * 7 + ["XL430-W250"] * 2
    follower = load_config("koch_v1_1_follower")
    assert [s.id for s in follower.servos] == list(range(1, 7))
    assert [s.model for s in follower.servos] == ["XL430-W250"] * 2 + ["XL330-M288"] * 4
    leader = load_config("koch_v1_1_leader")
    assert [s.id for s in leader.servos] == list(range(1, 7))
    assert {s.model for s in leader.servos} == {"XL330-M077"}
    assert leader.safety.estop_action is EstopAction.TORQUE_OFF
    hexapod = load_config("hexapod")
    assert [s.id for s in hexapod.servos] == list(range(1, 19)) and hexapod.buses[0].protocol == 1
    assert {s.model for s in hexapod.servos} == {"AX-12A"}
    assert len(hexapod.chains) == 6
    bimanual = load_config("bimanual")
    assert len(bimanual.buses) == 2 and bimanual.chain_names == ("left", "right")
    for side in ("left", "right"):
        arm = [(s.id, s.model) for s in bimanual.servos if s.bus == side]
        assert arm == [(i, "XM430-W350") for i in range(1, 7)]
    for name in SHIPPED:
        assert {b.baudrate for b in load_config(name).buses} == {1_000_000}


def test_unknown_name_lists_the_shipped_robots():
    with pytest.raises(ConfigError) as err:
        load_config("robot_that_does_not_exist")
    assert "openmanipulator_x" in str(err.value)


def _edit(config_data_of, edit):
    data = copy.deepcopy(config_data_of("openmanipulator_x"))
    edit(data)
    return data


BAD = {
    "unknown field": (lambda d: d.update(colour="red"), ("colour",), "unknown field"),
    "missing field": (lambda d: d.pop("servos"), ("servos",), "missing"),
    "bad type": (lambda d: d.update(rate_hz="fast"), ("rate_hz",), "number"),
    "negative rate": (lambda d: d.update(rate_hz=-5), ("rate_hz",), "greater than or equal to 1"),
    "servo id out of range": (
        lambda d: d["servos"][0].update(id=300),
        ("servos", 0, "id"),
        "252",
    ),
    "bad direction": (
        lambda d: d["servos"][1].update(direction=2),
        ("servos", 1, "direction"),
        "",
    ),
    "duplicate servo id": (
        lambda d: d["servos"][2].update(id=11),
        ("servos", 2, "id"),
        "duplicate servo id 11",
    ),
    "joint driven twice": (
        lambda d: d["servos"][2].update(joint="joint1"),
        ("servos", 2, "joint"),
        "shadow_of",
    ),
    "shadow without primary": (
        lambda d: d["servos"][4].update(shadow_of=99),
        ("servos", 4, "shadow_of"),
        "no primary",
    ),
    "unknown bus": (lambda d: d["servos"][0].update(bus="left"), ("servos", 0, "bus"), "left"),
    "unknown solver": (
        lambda d: d["chains"][0].update(solver="magic"),
        ("chains", 0, "solver"),
        "",
    ),
    "velocity scale above one": (
        lambda d: d["safety"].update(velocity_limit=2.0),
        ("safety", "velocity_limit"),
        "scale",
    ),
    "reversed soft limits": (
        lambda d: d["safety"].update(soft_limits={"joint1": [1.0, -1.0]}),
        ("safety", "soft_limits"),
        "below",
    ),
    "unknown estop action": (
        lambda d: d["safety"].update(estop_action="explode"),
        ("safety", "estop_action"),
        "",
    ),
    "reserved chain name": (
        lambda d: d["chains"][0].update(name="joints"),
        ("chains", 0, "name"),
        "reserved",
    ),
    # Checks against the URDF, the servo tables and the bus budget:
    "unknown joint": (
        lambda d: d["servos"][3].update(joint="joint9"),
        ("servos", 3, "joint"),
        "unknown joint 'joint9'",
    ),
    "mimic joint driven": (
        lambda d: d["servos"][4].update(joint="gripper_sub"),
        ("servos", 4, "joint"),
        "unknown joint",
    ),
    "unknown home joint": (
        lambda d: d["home"].update(joint9=0.0),
        ("home", "joint9"),
        "unknown joint",
    ),
    "home outside limits": (
        lambda d: d["home"].update(joint3=3.0),
        ("home", "joint3"),
        "outside",
    ),
    "unknown soft-limit joint": (
        lambda d: d["safety"].update(soft_limits={"elbow": [0, 1]}),
        ("safety", "soft_limits", "elbow"),
        "unknown joint",
    ),
    "unknown source link": (
        lambda d: d["chains"][0].update(source_link="base"),
        ("chains", 0, "source_link"),
        "base",
    ),
    "unknown target link": (
        lambda d: d["chains"][0].update(target_link="tcp"),
        ("chains", 0, "target_link"),
        "tcp",
    ),
    "source not an ancestor": (
        lambda d: d["chains"][0].update(source_link="end_effector_link", target_link="link1"),
        ("chains", 0, "source_link"),
        "not an ancestor",
    ),
    "chain through an undriven joint": (
        lambda d: (
            d["servos"].pop(3),
            d["home"].pop("joint4"),
            d["safety"]["soft_limit_margin"].pop("joint4"),
            d["safety"]["velocity_limit"].pop("joint4"),
        ),
        ("chains", 0),
        "not driven",
    ),
    "limit outside the servo range": (
        lambda d: d["servos"][0].update(offset=2.0),
        ("servos", 0),
        "exceed the range of servo 11",
    ),
    "unknown servo model": (
        lambda d: d["servos"][0].update(model="XM999"),
        ("servos", 0, "model"),
        "unknown Dynamixel model",
    ),
    "model on the wrong protocol": (
        lambda d: d["servos"][0].update(model="AX-12A"),
        ("servos", 0, "model"),
        "protocol 1.0",
    ),
    "baud rate the servos cannot run": (
        lambda d: d["buses"][0].update(baudrate=1234),
        ("buses", 0, "baudrate"),
        "cannot run at 1234",
    ),
    "rate the bus cannot carry": (
        lambda d: d.update(rate_hz=1500),
        ("rate_hz",),
        "more than bus 'main' can carry",
    ),
    "unknown solver option": (
        lambda d: d["chains"][0]["options"].update(dampening=3),
        ("chains", 0, "options"),
        "dampening",
    ),
}

INF, NAN = float("inf"), float("nan")

#: Strict numbers: every safety number finite and in a sane range (YAML ``.inf``, ``.nan``).
UNSAFE_NUMBERS = {
    "infinite max delta": (
        lambda d: d["safety"].update(max_delta_per_cycle=INF),
        ("safety", "max_delta_per_cycle"),
        "finite",
    ),
    "absurd max delta": (
        lambda d: d["safety"].update(max_delta_per_cycle=5.0),
        ("safety", "max_delta_per_cycle"),
        "less than or equal to 0.5",
    ),
    "infinite velocity scale": (
        lambda d: d["safety"].update(velocity_limit=INF),
        ("safety", "velocity_limit"),
        "(0, 1]",
    ),
    "infinite joint velocity": (
        lambda d: d["safety"].update(velocity_limit={"joint2": INF}),
        ("safety", "velocity_limit", "joint2"),
        "got inf",
    ),
    "absurd joint velocity": (
        lambda d: d["safety"].update(velocity_limit={"joint2": 500.0}),
        ("safety", "velocity_limit", "joint2"),
        "(0, 50]",
    ),
    "nan watchdog": (
        lambda d: d["safety"].update(watchdog_timeout=NAN),
        ("safety", "watchdog_timeout"),
        "finite",
    ),
    "infinite watchdog": (
        lambda d: d["safety"].update(watchdog_timeout=INF),
        ("safety", "watchdog_timeout"),
        "finite",
    ),
    "watchdog shorter than a cycle": (
        lambda d: d["safety"].update(watchdog_timeout=0.004),
        ("safety", "watchdog_timeout"),
        "not longer than one cycle at 200 Hz",
    ),
    "infinite bus watchdog": (
        lambda d: d["safety"].update(bus_watchdog=INF),
        ("safety", "bus_watchdog"),
        "finite",
    ),
    "infinite margin": (
        lambda d: d["safety"].update(soft_limit_margin=INF),
        ("safety", "soft_limit_margin"),
        "finite",
    ),
    "negative joint margin": (
        lambda d: d["safety"]["soft_limit_margin"].update(joint2=-0.1),
        ("safety", "soft_limit_margin", "joint2"),
        "finite number >= 0",
    ),
    "margin for an unknown joint": (
        lambda d: d["safety"]["soft_limit_margin"].update(elbow=0.1),
        ("safety", "soft_limit_margin", "elbow"),
        "unknown joint",
    ),
    # 3.0 rad is more than half of every arm joint's range: it used to be skipped silently,
    # and the run then used the full URDF limits, wider than with the default margin.
    "margin wider than a joint": (
        lambda d: d["safety"].update(soft_limit_margin=3.0),
        ("safety", "soft_limit_margin"),
        "leaves joint 'joint1' 0.0000 of its range",
    ),
    "margin leaving less than the minimum range": (
        lambda d: d["safety"]["soft_limit_margin"].update(gripper=0.014),  # 29 mm of travel
        ("safety", "soft_limit_margin", "gripper"),
        "leaves joint 'gripper' 0.0010 of its range",
    ),
    "infinite soft limit": (
        lambda d: d["safety"].update(soft_limits={"joint1": [-INF, 1.0]}),
        ("safety", "soft_limits", "joint1", 0),
        "finite",
    ),
    "soft limits outside the joint": (
        lambda d: d["safety"].update(soft_limits={"joint1": [5.0, 6.0]}),
        ("safety", "soft_limits", "joint1"),
        "leaves nothing",
    ),
    "infinite rate": (lambda d: d.update(rate_hz=INF), ("rate_hz",), "finite"),
    "rate below 1 Hz": (lambda d: d.update(rate_hz=0.5), ("rate_hz",), "greater than or equal"),
    "nan home": (lambda d: d["home"].update(joint1=NAN), ("home", "joint1"), "finite"),
    "infinite offset": (
        lambda d: d["servos"][0].update(offset=INF),
        ("servos", 0, "offset"),
        "finite",
    ),
    "infinite gear ratio": (
        lambda d: d["servos"][0].update(gear_ratio=INF),
        ("servos", 0, "gear_ratio"),
        "finite",
    ),
    "infinite solver option": (
        lambda d: d["chains"][0]["options"].update(max_delta=INF),
        ("chains", 0, "options"),
        "max_delta: must be a finite number",
    ),
}
BAD.update(UNSAFE_NUMBERS)


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_config_fails_at_load_with_the_field_path(case, config_data_of, write_yaml):
    edit, loc, words = BAD[case]
    path = write_yaml(_edit(config_data_of, edit))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.loc == loc, str(err.value)
    assert err.value.source == path
    assert words in str(err.value)


def test_unreadable_and_non_mapping_files(tmp_path, write_yaml):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)


def test_missing_urdf(config_data_of, write_yaml):
    data = config_data_of("openmanipulator_x")
    data["urdf"] = "nowhere.urdf"
    with pytest.raises(ConfigError) as err:
        load_config(write_yaml(data))
    assert err.value.loc == ("urdf",)


def test_config_is_frozen(config_data_of):
    config = parse_config(config_data_of("openmanipulator_x"))
    with pytest.raises(ValueError, match="frozen"):
        config.rate_hz = 5  # type: ignore[misc]


def test_specs_for_the_hal():
    config = load_config("widowx_250s")
    specs = config.servo_specs()
    shadow = next(s for s in specs if s.id == 3)
    assert (shadow.joint, shadow.shadow_of, shadow.direction) == ("shoulder", 2, -1)
    (bus,) = config.bus_specs().values()
    assert (bus.baudrate, bus.protocol) == (1_000_000, 2)


def test_field_path_rendering():
    err = ConfigError(None, ("servos", 2, "id"), "duplicate")
    assert err.field == "servos[2].id"
    assert str(err) == "servos[2].id: duplicate"


def test_unlimited_joint_without_soft_limits_fails_at_load(config_data_of, write_yaml):
    # The WidowX gripper is a continuous joint in the URDF; the servo reaches one turn.
    data = config_data_of("widowx_250s")
    data["safety"]["soft_limits"] = {}
    with pytest.raises(ConfigError) as err:
        load_config(write_yaml(data))
    assert err.value.loc == ("safety", "soft_limits", "gripper")
    assert "unlimited" in str(err.value) and "give soft limits" in str(err.value)


def test_a_margin_that_leaves_too_little_is_refused_by_the_safety_layer_too():
    # A config built in Python skips load_config; the safety layer must not skip the margin.
    from hilbot.driver.runtime.safety import effective_limits

    urdf = {"a": (-1.0, 1.0, 2.0)}
    limits = effective_limits(["a"], urdf, soft_limits={}, margin=0.9, velocity=1.0)
    assert (limits.lower[0], limits.upper[0]) == pytest.approx((-0.1, 0.1))  # 10 % is left
    with pytest.raises(ConfigError) as err:
        effective_limits(["a"], urdf, soft_limits={}, margin=0.95, velocity=1.0)
    assert err.value.loc == ("safety", "soft_limit_margin") and "joint 'a'" in str(err.value)


def test_strict_numbers_errors_are_one_line(config_data_of, write_yaml):
    data = config_data_of("openmanipulator_x")
    data["safety"]["max_delta_per_cycle"] = INF
    path = write_yaml(data)
    assert ".inf" in path.read_text()  # as a user writes it in YAML
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"{path}: safety.max_delta_per_cycle: Input should be a finite number (got inf)"
    )


@pytest.mark.parametrize("field", ["offset", "gear_ratio"])
def test_servo_specs_built_in_python_refuse_non_finite_numbers(field):
    from hilbot.hal.mapping import ServoSpec

    with pytest.raises(ValueError, match="finite"):
        ServoSpec(1, "XM430-W350", "joint1", **{field: INF})


def test_the_virtual_margin_knows_the_default_bus_watchdog():
    from hilbot.driver.runtime.backends import DEFAULT_BUS_WATCHDOG
    from hilbot.driver.runtime.config import RobotConfig

    safety = RobotConfig.model_fields["safety"].annotation
    assert safety().bus_watchdog == DEFAULT_BUS_WATCHDOG


def test_a_bus_reply_margin_reaches_the_backend_and_is_bounded(config_data_of):
    from hilbot.driver.runtime.backends import dynamixel_backend

    data = config_data_of("openmanipulator_x")
    data["buses"][0]["reply_margin_ms"] = 40.0
    backend = dynamixel_backend(parse_config(data))
    assert backend._bus.port.margin_ms == 40.0  # the deadline the bus waits with
    assert dynamixel_backend(parse_config(data), margin_ms=5.0)._bus.port.margin_ms == 5.0
    for bad in (0.0, -1.0, float("inf"), 1e4):
        data["buses"][0]["reply_margin_ms"] = bad
        with pytest.raises(ConfigError, match=r"buses\[0\]\.reply_margin_ms"):
            parse_config(data)
