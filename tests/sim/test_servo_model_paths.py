"""The servo model's two integrators agree: Python floats (few servos) and numpy arrays."""

import numpy as np
import pytest

from hilbot.sim import servo_model
from hilbot.sim.servo_model import ServoModel
from hilbot.sim.servo_physics import physics_for

PHYSICS = [
    physics_for("XM430-W350", overload_time=0.2, thermal_time_constant=3.0),
    physics_for("AX-12A"),
    physics_for("XL430-W250", overload_time=0.05),
    physics_for("XM540-W270"),
]
STATE = (
    "position",
    "velocity",
    "reference",
    "reference_velocity",
    "motor_torque",
    "temperature",
    "hardware_error",
    "torque_enabled",
    "goal",
)


def scenario(seed: int) -> list[dict[str, np.ndarray]]:
    """Random commands, loads, faults and step sizes; the state after every step."""
    rng = np.random.default_rng(seed)
    model = ServoModel(PHYSICS, initial_positions=rng.uniform(-1, 1, len(PHYSICS)))
    n = model.n
    model.set_torque(np.arange(n), True)
    model.set_profile(np.arange(n), velocity=[0.0, 2.0, 5.0, 0.0], acceleration=[0, 8, 0, 30])
    if seed % 2:
        model.load_function = lambda q: -1.5 * np.cos(q)
    out = []
    for k in range(300):
        event = rng.integers(0, 14)
        joint = int(rng.integers(0, n))
        if event <= 5:
            model.set_goal(np.arange(n), rng.uniform(-4, 4, n))  # some clamped to the range
        elif event == 6:
            model.set_torque([joint], bool(rng.random() < 0.3))
        elif event == 7:
            model.set_external_torque([joint], rng.normal(0, 3))
        elif event == 8:
            model.reboot([joint])
        elif event >= 12:
            model.set_torque(np.arange(n), True)
        elif event == 9 and k % 40 == 0:
            model.voltage[joint] = rng.choice([5.0, 12.0, 24.0])
            model.invalidate()
        dt = float(rng.choice([0.0, 3e-4, 1e-3, 1.7e-3, 4e-3, 0.03, 0.25]))
        model.step(dt)
        out.append({name: np.array(getattr(model, name), copy=True) for name in STATE})
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_float_path_gives_the_states_of_the_array_path(seed, monkeypatch):
    floats = scenario(seed)
    monkeypatch.setattr(servo_model, "SCALAR_MAX_SERVOS", 0)
    arrays = scenario(seed)
    for step, (a, b) in enumerate(zip(floats, arrays, strict=True)):
        for name in STATE:
            assert np.allclose(a[name], b[name], rtol=1e-9, atol=1e-12), (step, name)


def test_both_paths_run_in_that_scenario():
    states = scenario(1)
    moved = np.abs(states[-1]["position"] - states[0]["position"])
    assert moved.max() > 0.1
    assert any(s["hardware_error"].any() for s in states)
    assert not all(s["torque_enabled"].all() for s in states)
