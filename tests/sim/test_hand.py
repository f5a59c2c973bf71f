"""The scripted hand moves torque-off virtual servos; the real backend reads it on the wire."""

from __future__ import annotations

import math

import pytest

from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim import running_virtual_bus
from hilbot.sim.hand import Function, Hand, Keyframes, motion_named, move_to, sweep, wave
from hilbot.sim.mounting import Mounting, mounted, parse_mounting

SPECS = (ServoSpec(1, "XL430-W250", "a"), ServoSpec(2, "XL330-M288", "b", offset=0.5))
TICK = 2 * math.pi / 4096


async def _read(bus_port: str, specs: tuple[ServoSpec, ...] = SPECS) -> dict[str, float]:
    async with DynamixelBackend(BusSpec(bus_port), specs, margin_ms=20.0) as backend:
        return (await backend.read()).positions()


async def test_hand_moves_torque_off_servos_on_the_wire() -> None:
    with running_virtual_bus(SPECS, return_delay_time=0) as bus, Hand(bus, SPECS) as hand:
        assert hand.perform(move_to({"a": 0.7, "b": -0.4}, 0.2), timeout=30.0)
        seen = await _read(bus.port)
    assert seen["a"] == pytest.approx(0.7, abs=2 * TICK)
    assert seen["b"] == pytest.approx(-0.4, abs=2 * TICK)


async def test_a_mounting_error_shows_in_the_configs_frame() -> None:
    # Servo 2 sits 20 degrees off and turned around: the config (offset 0.5, +1) then
    # reads joint q as 0.5 - (q - 0.5 - 20°) = 1 - q + 20°.
    true = mounted(SPECS, {2: Mounting(math.radians(20), reversed=True)})
    with running_virtual_bus(true, return_delay_time=0) as bus, Hand(bus, true) as hand:
        assert hand.perform(move_to({"b": 0.3}, 0.1), timeout=30.0)
        seen = await _read(bus.port)
    assert seen["b"] == pytest.approx(1.0 - 0.3 + math.radians(20), abs=2 * TICK)


async def test_the_hand_lets_go_of_a_servo_with_torque_on() -> None:
    with running_virtual_bus(SPECS, return_delay_time=0) as bus:
        bus.model.set_torque([0], True)
        hand = Hand(bus, SPECS)
        hand.place({"a": 1.0, "b": 1.0})
        assert float(bus.model.position[0]) == 0.0
        assert float(bus.model.position[1]) == pytest.approx(0.5)


def test_sweep_visits_each_end_of_each_range() -> None:
    motion = sweep({"a": (-1.0, 1.0), "b": (0.0, 2.0)}, seconds=1.0)
    start = {"a": 0.3, "b": 0.3}
    samples = [motion.at(k * 0.01, start) for k in range(int(motion.duration * 100) + 1)]
    assert min(s["a"] for s in samples) == pytest.approx(-1.0)
    assert max(s["a"] for s in samples) == pytest.approx(1.0)
    assert min(s["b"] for s in samples) == pytest.approx(0.0)
    assert max(s["b"] for s in samples) == pytest.approx(2.0)
    assert motion.at(motion.duration, start) == pytest.approx({"a": 0.0, "b": 1.0})
    assert motion.at(0.0, start) == pytest.approx(start)


def test_wave_stays_in_range_and_blends_from_the_start() -> None:
    motion = wave({"a": 0.9}, {"a": (-1.0, 1.0)}, amplitude=1.0)
    assert motion.at(0.0, {"a": -0.5}) == pytest.approx({"a": -0.5})
    assert all(-1.0 <= motion.at(t * 0.05, {"a": 0.0})["a"] <= 1.0 for t in range(200))
    custom = Function(lambda t: {"a": t}, duration=2.0, blend=0.0)
    assert custom.at(1.5, {"a": 9.0}) == {"a": 1.5}


@pytest.mark.parametrize(
    ("text", "problem"),
    [("x:1", "expected ID"), ("1:abc", "not a number"), ("1:2:upside", "only be 'reversed'")],
    ids=["bad id", "bad degrees", "bad flag"],
)
def test_bad_mountings_are_refused_by_name(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_mounting(text)


def test_mountings_parse_and_name_known_servos() -> None:
    assert parse_mounting("3:90:reversed") == (3, Mounting(math.pi / 2, True))
    with pytest.raises(ValueError, match="not configured"):
        mounted(SPECS, {7: Mounting()})
    with pytest.raises(ValueError, match="unknown hand motion"):
        motion_named("dance", {}, {})
    with pytest.raises(ValueError, match="finite"):
        Keyframes(((math.nan, {}),))


def test_run_backend_virtual_with_a_waving_hand(tmp_path: object) -> None:
    """``hilbot run --backend virtual --hand wave``: the disarmed arm is seen moving."""
    import subprocess
    import sys
    from pathlib import Path

    import numpy as np

    record = Path(str(tmp_path)) / "wave.npz"
    done = subprocess.run(
        [sys.executable, "-m", "hilbot", "run", "koch_v1_1_leader", "--backend", "virtual",
         "--hand", "wave", "--mount", "3:20:reversed", "--duration", "6", "--no-mqtt",
         "--no-status", "--record", str(record)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    q = np.load(record, allow_pickle=True)["q_measured"]
    # 6 s is 1.5 periods of the wave (4 s): every joint's swing is seen whole even when a
    # loaded machine took seconds to start the bus (with 3 s, one joint fell short once)
    assert (q.max(axis=0) - q.min(axis=0) > 0.2).all()  # every joint waved


def test_run_refuses_a_bad_mount_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from hilbot.driver.cli import main

    argv = ["run", "koch_v1_1_follower", "--backend", "virtual", "--mount", "2:x", "--no-mqtt"]
    assert main(argv) == 2  # was 1, from the virtual bus's child process, after it started
    assert "not a number of degrees" in capsys.readouterr().err
