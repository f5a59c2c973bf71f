import math

import numpy as np
import pytest

from hilbot.driver.bench.errors import ScenarioError
from hilbot.driver.bench.scenario import (
    CartesianCircleStep,
    load_scenario,
    parse_scenario,
    resolve_scenario,
    shipped_scenarios,
)
from hilbot.driver.bench.segments import Circle, JointPath, Line, StepContext, Sweep, min_jerk

SHIPPED = shipped_scenarios()


def _scenario(*steps, **extra):
    return {"name": "t", "steps": list(steps), **extra}


def test_every_shipped_scenario_validates():
    assert {"openmanipulator_sweep", "openmanipulator_circle", "openmanipulator_step"} <= set(
        SHIPPED
    )
    assert "openmanipulator_faults" in SHIPPED
    for name in SHIPPED:
        scenario = load_scenario(name)
        assert scenario.name == name
        assert scenario.duration() > 0


@pytest.mark.parametrize(
    ("steps", "field", "words"),
    [
        (
            [{"kind": "cartesian_circle", "chain": "arm", "radius": -1, "period": 1}],
            "steps.0.cartesian_circle.radius",
            "greater than 0",
        ),
        ([{"kind": "teleport", "duration": 1}], "steps.0.kind", "unknown step kind 'teleport'"),
        ([{"duration": 1}], "steps.0.kind", "every step needs a kind; known: hold, move_joints"),
        (
            [
                {"kind": "hold", "duration": 1},
                {"kind": "cartesian_line", "chain": "a", "duration": 1},
            ],
            "steps.1.cartesian_line",
            "exactly one of 'offset'",
        ),
        (
            [{"kind": "hold", "duration": 1, "speed": 3}],
            "steps.0.hold.speed",
            "unknown field; known: duration",
        ),
        ([{"kind": "fault", "action": "explode", "joint": "j"}], "steps.0.fault.action", "drop"),
        (
            [{"kind": "cartesian_line", "chain": "arm", "offset": [0.1, 0], "duration": 1}],
            "steps.0.cartesian_line.offset",
            "expected three numbers [x, y, z], got 2",
        ),
        (
            [
                {
                    "kind": "cartesian_circle",
                    "chain": "a",
                    "radius": 1,
                    "period": 1,
                    "normal": [0] * 3,
                }
            ],
            "steps.0.cartesian_circle.normal",
            "must be a non-zero vector",
        ),
        (
            [
                {
                    "kind": "cartesian_circle",
                    "chain": "a",
                    "radius": 1,
                    "period": 1,
                    "normal": [0, 0, 1],
                    "towards": [0, 0, -2],
                }
            ],
            "steps.0.cartesian_circle.towards",
            "no component in the circle's plane",
        ),
        ([{"kind": "joint_sweep", "joints": []}], "steps.0.joint_sweep.joints", "at least 1"),
    ],
    ids=[
        "negative-radius",
        "unknown-kind",
        "no-kind",
        "line-without-goal",
        "extra-field",
        "bad-fault",
        "two-numbers",
        "zero-normal",
        "towards-along-normal",
        "sweep-of-nothing",
    ],
)
def test_bad_fields_are_reported_with_their_path(steps, field, words):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_scenario(*steps))
    fields = [loc for loc, _ in info.value.problems]
    assert field in fields, fields
    message = dict(info.value.problems)[field]
    assert words in message
    # One bad step is reported once, not echoed as "steps: at least 1 item" too.
    assert "steps" not in fields


@pytest.mark.parametrize(
    ("thresholds", "field", "words"),
    [
        ({"ee_rms": 0.1}, "thresholds.ee_rms", "unknown field; known: ee_rms_max, ee_max_max"),
        ({"final_mode": "disarmd"}, "thresholds.final_mode", "'disarmed', 'armed'"),
    ],
)
def test_bad_thresholds_name_the_field_and_the_choices(thresholds, field, words):
    steps = [{"kind": "hold", "duration": 1}]
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_scenario(*steps, thresholds=thresholds))
    assert words in dict(info.value.problems)[field]


def test_a_yaml_syntax_error_gives_its_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps:\n  - {kind: hold, duration: 1\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(bad)
    assert str(info.value).startswith(f"{bad}: invalid scenario: not valid YAML: line 4, column 1:")


def test_bad_threshold_and_empty_steps(tmp_path):
    with pytest.raises(ScenarioError) as info:
        parse_scenario({"name": "t", "steps": [], "thresholds": {"ee_rms_max": -1}})
    fields = {loc for loc, _ in info.value.problems}
    assert fields == {"steps", "thresholds.ee_rms_max"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML") as info:
        load_scenario(bad)
    assert info.value.path == bad


def test_unknown_scenario_name_lists_the_shipped_ones():
    with pytest.raises(ScenarioError) as info:
        resolve_scenario("no_such_scenario")
    assert "openmanipulator_circle" in str(info.value)


def test_scaling_stretches_every_timed_step():
    scenario = load_scenario("openmanipulator_circle")
    half = scenario.scaled(0.5)
    assert half.duration() == pytest.approx(scenario.duration() * 0.5)
    circle = next(s for s in half.steps if isinstance(s, CartesianCircleStep))
    assert circle.period == pytest.approx(2.0)
    with pytest.raises(ValueError, match="positive"):
        scenario.scaled(0)


def test_min_jerk_is_smooth_at_both_ends():
    assert min_jerk(0) == 0 and min_jerk(1) == 1 and min_jerk(0.5) == pytest.approx(0.5)
    eps = 1e-4
    assert min_jerk(eps) / eps < 1e-6  # zero velocity at the start
    assert (1 - min_jerk(1 - eps)) / eps < 1e-6


def _ctx(**joints):
    q = joints or {"a": 0.0, "b": 0.5}
    return StepContext(
        joints=q,
        ee={"arm": np.array([0.2, 0.0, 0.1])},
        limits={"a": (-1.0, 1.0), "b": (-0.2, 0.6)},
        home={"a": 0.3, "b": 0.0},
    )


def test_circle_starts_at_the_current_point_and_keeps_its_radius():
    step = CartesianCircleStep(kind="cartesian_circle", chain="arm", radius=0.03, period=2.0)
    circle = Circle(step, _ctx().ee["arm"])
    ts = np.linspace(0, circle.duration, 101)
    points = np.array([circle.at(t).position for t in ts])
    np.testing.assert_allclose(points[0], [0.2, 0.0, 0.1], atol=1e-12)
    np.testing.assert_allclose(points[-1], [0.2, 0.0, 0.1], atol=1e-12)
    radii = np.linalg.norm(points - circle.center, axis=1)
    np.testing.assert_allclose(radii, 0.03, atol=1e-12)
    np.testing.assert_allclose(points[:, 2], 0.1, atol=1e-12)  # horizontal plane
    assert np.ptp(points[:, 0]) == pytest.approx(0.06, abs=1e-3)


def test_sweep_stays_inside_the_limits_with_margin():
    step = parse_scenario(
        _scenario({"kind": "joint_sweep", "amplitude": 1.0, "margin": 0.05, "period": 1.0})
    ).steps[0]
    sweep = Sweep(step, _ctx())
    values = np.array([[sweep.at(t).joints[j] for j in "ab"] for t in np.linspace(0, 2, 401)])
    assert values[:, 0].min() == pytest.approx(-0.95, abs=1e-3)
    assert values[:, 1].max() <= 0.6 - 0.05 + 1e-9  # b starts 0.1 from its upper limit
    assert values[:, 1].max() == pytest.approx(0.55, abs=1e-3)
    assert sweep.duration == pytest.approx(2.0)
    # Without ``joints`` every joint is swept, one after the other: the plan counts them all.
    scenario = parse_scenario(_scenario(step.model_dump()))
    assert scenario.duration(n_joints=2) == pytest.approx(sweep.duration)


def test_line_goes_there_and_back_and_joint_path_reaches_home():
    step = parse_scenario(
        _scenario(
            {
                "kind": "cartesian_line",
                "chain": "arm",
                "offset": [0, 0.05, 0],
                "duration": 1,
                "back": True,
            }
        )
    ).steps[0]
    line = Line(step, _ctx().ee["arm"])
    np.testing.assert_allclose(line.at(1.0).position, [0.2, 0.05, 0.1])
    np.testing.assert_allclose(line.at(2.0).position, [0.2, 0.0, 0.1])
    path = JointPath(_ctx().joints, _ctx().home, 1.0, back=False)
    assert path.at(1.0).joints == pytest.approx({"a": 0.3, "b": 0.0})
    assert math.isclose(path.at(0.5).joints["a"], 0.15)
