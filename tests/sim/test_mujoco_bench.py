"""hilbot bench and replay on the MuJoCo backend: fake clock, deterministic, a scene."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="the mujoco extra is not installed")

from hilbot.driver.bench.backends import BackendKind, ClockKind
from hilbot.driver.bench.compare import compare_commands
from hilbot.driver.bench.replay import replay
from hilbot.driver.bench.runner import RunOptions, run_bench
from hilbot.driver.bench.scenario import Scenario, load_scenario, resolve_scenario
from hilbot.driver.cli import main
from hilbot.driver.runtime.config import load_config


@pytest.fixture(scope="module")
def config():
    return load_config("openmanipulator_x")


async def _bench(config, scenario, kind=BackendKind.MUJOCO):
    options = RunOptions(config_path="openmanipulator_x", clock="fake", progress=False)
    return await run_bench(config, scenario, kind, ClockKind.FAKE, options)


async def test_a_bench_run_on_mujoco_replays_bit_for_bit(config):
    scenario = load_scenario(resolve_scenario("openmanipulator_circle")).scaled(0.2)
    recording = await _bench(config, scenario)
    assert recording.header.backend == "mujoco"
    again = await replay(recording, config, progress=False)
    assert again.header.backend == "mujoco"
    diff = compare_commands(recording, again, atol=0.0)
    assert diff.identical and diff.cycles_compared == recording.n_cycles
    # the body sags under gravity where the plain simulator does not: they differ
    plain = await _bench(config, scenario, BackendKind.SIM)
    n = min(plain.n_cycles, recording.n_cycles)
    gap = np.nanmax(np.abs(plain["q_measured"][:n] - recording["q_measured"][:n]))
    assert gap > 1e-3


async def test_a_scenario_scene_stands_in_the_way(config):
    def scenario(scene):
        return Scenario.model_validate(
            {
                "name": "blocked",
                "steps": [
                    {"kind": "command", "command": "enable"},
                    {
                        "kind": "move_joints",
                        "duration": 1.0,
                        "positions": {**config.home, "joint1": 1.2},
                    },
                    {"kind": "hold", "duration": 0.5},
                ],
                "scene": scene,
            }
        )

    post = [{"name": "post", "shape": "box", "size": [0.02, 0.02, 0.2], "pos": [0.1, 0.12, 0.2]}]
    blocked = await _bench(config, scenario(post))
    free = await _bench(config, scenario([]))
    j = blocked.header.joint_names.index("joint1")
    assert free["q_measured"][-1, j] == pytest.approx(1.2, abs=0.02)
    assert blocked["q_measured"][-1, j] < 1.0


def test_a_bad_scene_object_fails_at_load():
    with pytest.raises(ValueError, match="unknown shape 'cone'"):
        Scenario.model_validate(
            {
                "name": "bad",
                "steps": [{"kind": "hold", "duration": 0.1}],
                "scene": [{"name": "x", "shape": "cone", "size": [1], "pos": [0, 0, 0]}],
            }
        )


def test_bench_cli_mujoco_against_sim(tmp_path, capsys):
    code = main(
        [
            "bench",
            "openmanipulator_x",
            "--scenario",
            "openmanipulator_step",
            "--backend",
            "mujoco",
            "--compare-backend",
            "sim",
            "--clock",
            "fake",
            "--duration-scale",
            "0.2",
            "--no-plots",
            "--quiet",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "on mujoco (fake clock)" in out and "comparison sim minus mujoco" in out
    assert (tmp_path / "mujoco" / "recording.npz").is_file()


async def test_the_blocked_scenario_needs_physics(config, tmp_path):
    from hilbot.driver.bench.report import write_outputs

    scenario = load_scenario(resolve_scenario("openmanipulator_blocked"))
    on_body = await _bench(config, scenario)
    without = await _bench(config, scenario, BackendKind.SIM)
    passed = write_outputs(on_body, scenario.thresholds, tmp_path / "mujoco", plots=False)
    missed = write_outputs(without, scenario.thresholds, tmp_path / "sim", plots=False)
    assert passed.passed
    assert [r.name for r in missed.missed()] == ["faults_min"]


async def test_the_gravity_hold_scenario_reports_the_holding_current(config, tmp_path):
    from hilbot.driver.bench.report import write_outputs

    scenario = load_scenario(resolve_scenario("openmanipulator_gravity_hold"))
    on_body = await _bench(config, scenario)
    without = await _bench(config, scenario, BackendKind.SIM)
    passed = write_outputs(on_body, scenario.thresholds, tmp_path / "mujoco", plots=False)
    missed = write_outputs(without, scenario.thresholds, tmp_path / "sim", plots=False)
    assert passed.passed
    assert passed.report.holding_effort["joint2"] > 0.4
    assert [r.name for r in missed.missed()] == ["holding_effort_min[joint2]"]
    assert missed.report.holding_effort["joint2"] < 0.1


async def test_a_recording_from_before_the_effort_channel_still_loads(config, tmp_path):
    from hilbot.driver.bench.recording import Recording

    scenario = load_scenario(resolve_scenario("openmanipulator_step")).scaled(0.1)
    recording = await _bench(config, scenario, BackendKind.SIM)
    path = recording.save(tmp_path / "new.npz")
    with np.load(path) as npz:
        old = {name: npz[name] for name in npz.files if name != "effort"}
    np.savez(tmp_path / "old.npz", **old)
    loaded = Recording.load(tmp_path / "old.npz")
    assert loaded["effort"].shape == recording["q_measured"].shape
    assert np.isnan(loaded["effort"]).all()
    assert np.isfinite(Recording.load(path)["effort"]).all()
