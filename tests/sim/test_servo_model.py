"""Properties of the servo dynamics model."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbot.hal.backend import EffortUnit, HardwareErrorFlags
from hilbot.sim.servo_model import ServoModel
from hilbot.sim.servo_physics import known_models, physics_for

XM = physics_for("XM430-W350")
AX = physics_for("AX-12A")


def run(model: ServoModel, seconds: float, dt: float = 0.002) -> None:
    for _ in range(round(seconds / dt)):
        model.step(dt)


def test_physics_exist_for_every_control_table_model():
    assert "XM430-W350" in known_models()
    assert "MX-28" in known_models() and "MX-28(2.0)" in known_models()
    assert physics_for("XL430-W250").effort_unit is EffortUnit.PERCENT  # address 126 is load
    assert physics_for("XM430-W350").effort_unit is EffortUnit.AMPERE
    assert math.isclose(AX.radians_per_tick, math.radians(300 / 1024))
    with pytest.raises(KeyError, match="XM430-W350"):
        physics_for("XM999")


@pytest.mark.parametrize("physics", [XM, AX], ids=["XM430", "AX-12A"])
def test_tracking_converges_to_the_goal_within_one_tick(physics):
    model = ServoModel([physics])
    model.set_torque([0], True)
    model.set_goal([0], [0.8])
    run(model, 2.0)
    assert abs(model.position[0] - 0.8) < physics.radians_per_tick
    assert model.velocity[0] == 0.0
    assert not model.moving[0]
    assert model.at_rest()


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    goal=st.floats(-2.5, 2.5),
    velocity=st.floats(0.5, 4.0),
    acceleration=st.floats(2.0, 40.0),
)
def test_the_profile_respects_velocity_and_acceleration_limits(goal, velocity, acceleration):
    model = ServoModel([XM])
    model.set_torque([0], True)
    model.set_profile([0], velocity=velocity, acceleration=acceleration)
    model.set_goal([0], [goal])
    dt = 0.004
    rv = [0.0]
    for _ in range(int((abs(goal) / velocity + velocity / acceleration + 0.5) / dt)):
        model.step(dt)
        rv.append(float(model.reference_velocity[0]))
        assert abs(rv[-1]) <= velocity + 1e-9
    accel = np.abs(np.diff(rv)) / dt
    assert accel.max() <= acceleration * (1 + 1e-6) + 1e-6
    assert model.reference[0] == pytest.approx(goal)
    assert model.position[0] == pytest.approx(goal, abs=2 * XM.radians_per_tick)


def test_the_motor_speed_limits_an_unlimited_profile():
    model = ServoModel([XM])
    model.set_torque([0], True)
    model.set_goal([0], [3.0])
    run(model, 0.3)
    assert 0 < model.velocity[0] <= XM.no_load_speed * 1.001


def test_present_position_is_quantised_to_encoder_ticks():
    model = ServoModel([XM, AX], initial_positions=[0.1234, -0.4321])
    ticks = model.present_ticks
    assert ticks.dtype == np.int64
    assert np.allclose(model.present_position, ticks * model.quantum)
    assert np.all(np.abs(model.present_position - model.position) <= model.quantum / 2)


def test_a_gravity_like_load_shows_as_tracking_error_and_current():
    model = ServoModel([XM])
    model.set_torque([0], True)
    model.set_external_torque([0], 1.0)
    run(model, 1.0)
    error = model.position[0] - model.goal[0]
    assert error == pytest.approx(1.0 / XM.stiffness, rel=0.1)  # k·e balances the load
    assert model.current[0] == pytest.approx(-1.0 / XM.stall_torque * XM.stall_current, rel=0.1)
    assert model.load[0] == pytest.approx(-100 / XM.stall_torque, rel=0.1)


def test_position_dependent_load():
    model = ServoModel([XM])
    model.set_torque([0], True)
    model.load_function = lambda q: -2.0 * np.cos(q)
    model.set_goal([0], [0.0])
    run(model, 1.0)
    assert model.position[0] < -0.01  # sags under "gravity"


def test_torque_off_coasts_and_friction_holds_a_small_load():
    model = ServoModel([XM])
    model.set_torque([0], True)
    model.set_goal([0], [1.0])
    run(model, 0.1)
    model.set_torque([0], False)
    moving = model.velocity[0]
    run(model, 2.0)
    assert moving > 0 and model.velocity[0] == 0.0  # coasted, then stopped by friction
    assert 0.1 < model.position[0] < 1.5
    held = model.position[0]
    model.set_external_torque([0], XM.friction * 0.5)
    run(model, 1.0)
    assert model.position[0] == held  # static friction beats a small load
    model.set_external_torque([0], -XM.friction * 5)
    run(model, 0.2)
    assert model.position[0] < held  # a larger one drives the limp joint


def test_enabling_torque_moves_to_a_stale_goal_like_the_firmware():
    model = ServoModel([XM])
    model.set_goal([0], [0.5])  # written while torque is off
    run(model, 0.5)
    assert model.position[0] == 0.0
    model.set_torque([0], True)
    run(model, 1.0)
    assert model.position[0] == pytest.approx(0.5, abs=XM.radians_per_tick)


def test_goal_is_clamped_to_the_position_range():
    model = ServoModel([AX])
    model.set_goal([0], [10.0])
    assert model.goal[0] == AX.max_position
    with pytest.raises(ValueError, match="finite"):
        model.set_goal([0], [math.nan])


def test_overload_latches_after_the_overload_time_and_cuts_torque():
    physics = physics_for("XM430-W350", overload_time=0.5)
    model = ServoModel([physics])
    model.set_torque([0], True)
    model.set_external_torque([0], physics.stall_torque * 1.5)
    run(model, 0.3)
    assert model.hardware_error[0] == 0
    run(model, 0.5)
    assert model.hardware_error[0] == HardwareErrorFlags.OVERLOAD
    assert not model.torque_enabled[0]
    model.set_torque([0], True)
    assert not model.torque_enabled[0]  # refused until reboot
    model.set_external_torque([0], 0.0)
    model.reboot([0])
    assert model.hardware_error[0] == 0
    model.set_torque([0], True)
    assert model.torque_enabled[0]


def test_overheating_latches_when_the_temperature_passes_the_limit():
    physics = physics_for("XM430-W350", thermal_time_constant=2.0, overload_time=1e9)
    model = ServoModel([physics])
    model.set_torque([0], True)
    model.set_external_torque([0], physics.stall_torque * 0.87)
    run(model, 1.0)
    assert 25.0 < model.temperature[0] < physics.temperature_limit
    run(model, 10.0, dt=0.02)
    assert model.hardware_error[0] & HardwareErrorFlags.OVERHEATING
    assert not model.torque_enabled[0]


def test_temperature_at_rest_is_integrated_exactly_in_one_go():
    physics = physics_for("XM430-W350", thermal_time_constant=10.0)
    a, b = ServoModel([physics]), ServoModel([physics])
    for m in (a, b):
        m.temperature = [60.0]
    run(a, 5.0, dt=0.001)
    b.step(5.0)
    assert a.temperature[0] == pytest.approx(b.temperature[0], abs=1e-9)
    assert a.temperature[0] == pytest.approx(25 + 35 * math.exp(-0.5), abs=1e-6)


def test_input_voltage_outside_the_limits():
    model = ServoModel([XM])
    model.voltage[0] = 5.0
    model.invalidate()
    model.step(0.01)
    assert model.hardware_error[0] == HardwareErrorFlags.INPUT_VOLTAGE


def test_stepping_is_deterministic_and_stable_for_long_gaps():
    def trajectory() -> np.ndarray:
        model = ServoModel([XM, AX])
        model.set_torque([0, 1], True)
        model.set_profile([0, 1], velocity=[1.0, 2.0], acceleration=[5.0, 0.0])
        model.set_goal([0, 1], [1.0, -1.0])
        out = []
        for dt in (0.001, 0.013, 0.2, 0.0, 0.05, 7.0):
            model.step(dt)
            out.append(model.position.copy())
        return np.array(out)

    first, second = trajectory(), trajectory()
    assert np.array_equal(first, second)
    assert np.allclose(first[-1], [1.0, -1.0], atol=AX.radians_per_tick)
