"""Shipped trajectories (configs/trajectories): found by name from any folder, playable."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from hilbot.configs import trajectory_names, trajectory_path
from hilbot.driver.cli import main
from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.trajectory import load_trajectory
from hilbot.driver.runtime.validation import load_robot


def test_wave_is_shipped_and_found_with_or_without_its_suffix():
    assert "wave.yaml" in trajectory_names()
    assert trajectory_path("wave") == trajectory_path("wave.yaml")
    with pytest.raises(FileNotFoundError, match=r"shipped trajectories: .*wave\.yaml"):
        trajectory_path("nowhere.yaml")


@pytest.mark.parametrize("name", trajectory_names())
def test_a_shipped_trajectory_stays_inside_the_limits_it_is_for(name):
    config = load_config("openmanipulator_x")
    trajectory = load_trajectory(trajectory_path(name))
    limits = load_robot(config.urdf).joints
    margin = config.safety.soft_limit_margin
    samples = [trajectory.sample(t) for t in np.arange(0.0, trajectory.duration, 0.005)]
    for joint in trajectory.names:
        values = np.array([s[joint] for s in samples])
        lower, upper = limits[joint].bounds()
        assert lower + margin[joint] <= values.min() and values.max() <= upper - margin[joint]
        speed = np.abs(np.diff(values)).max() / 0.005  # [rad/s] or [m/s]
        velocity = config.safety.velocity_limit
        limit = velocity[joint] if isinstance(velocity, dict) else velocity * 4.8
        assert speed < 0.5 * limit, (joint, speed)
    first, last = trajectory.sample(0.0), trajectory.sample(trajectory.duration)
    assert first == pytest.approx(dict(config.home)) == last  # starts at home; loops smoothly


def test_run_plays_wave_yaml_by_name_from_a_fresh_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["run", "openmanipulator_x", "--enable", "--no-mqtt", "--trajectory", "wave.yaml"]
    assert main([*args, "--duration", "2", "--stats", "stats.json"]) == 0
    data = json.loads((tmp_path / "stats.json").read_text())
    assert data["faults"] == [] and not any(data["clamps"].values())


def test_a_file_in_the_folder_wins_over_the_shipped_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wave.yaml").write_text(yaml.safe_dump({"waypoints": [{"t": 0.0}]}))
    assert main(["run", "--no-mqtt", "--enable", "--trajectory", "wave.yaml"]) == 2
    assert "wave.yaml: waypoints[0]" in capsys.readouterr().err  # this folder's, not shipped


def test_an_unknown_trajectory_names_the_shipped_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--no-mqtt", "--enable", "--trajectory", "wav.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no such file, and no shipped trajectory of that name (shipped: wave.yaml)" in err
