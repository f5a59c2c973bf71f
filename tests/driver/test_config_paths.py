"""Config paths as users give them: relative, copied elsewhere, or ``extends:`` a shipped robot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from hilbot.configs import ROBOTS_DIR, config_path
from hilbot.driver.runtime.config import load_config, merge
from hilbot.driver.runtime.errors import ConfigError
from tests.driver.conftest import CliResult

RUN = ["--backend", "virtual", "--no-mqtt", "--no-status", "--duration", "1"]


def _hilbot(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "XDG_CONFIG_HOME": str(cwd / "xdg")},
    )


@pytest.mark.parametrize("robot", ["so101_follower", "koch_v1_1_follower"])
def test_a_relative_config_path_runs_on_the_virtual_bus_from_another_folder(
    robot: str, tmp_path: Path
) -> None:
    # The shipped folder copied as a user's checkout: configs/robots/<robot>.yaml beside its
    # URDF, given relative to the folder the command runs in (the virtual bus's child
    # process runs in another one).
    robots = tmp_path / "configs" / "robots"
    shutil.copytree(ROBOTS_DIR, robots)
    ran = _hilbot("run", f"configs/robots/{robot}.yaml", *RUN, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "torque off" in ran.stdout + ran.stderr


def test_a_copied_yaml_finds_the_shipped_urdf_by_its_file_name(tmp_path: Path) -> None:
    # README: `hilbot run my_arm.yaml`, a copy of a shipped YAML whose URDF stayed behind.
    shutil.copy(config_path("so101_follower"), tmp_path / "my_arm.yaml")
    assert load_config(tmp_path / "my_arm.yaml").urdf == ROBOTS_DIR / "so101.urdf"
    ran = _hilbot("run", "my_arm.yaml", *RUN, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr


def test_a_urdf_beside_the_yaml_wins_over_the_shipped_one(tmp_path: Path) -> None:
    shutil.copy(config_path("so101_follower"), tmp_path / "my_arm.yaml")
    shutil.copy(ROBOTS_DIR / "so101.urdf", tmp_path / "so101.urdf")
    assert load_config(tmp_path / "my_arm.yaml").urdf == tmp_path / "so101.urdf"


def _extending(folder: Path, base: str, **fields: object) -> Path:
    path = folder / "my_arm.yaml"
    path.write_text(yaml.safe_dump({"extends": base, **fields}, sort_keys=False))
    return path


def test_an_extends_config_overrides_only_what_it_names(tmp_path: Path) -> None:
    path = _extending(
        tmp_path,
        "so101_leader",
        buses=[{"port": "/dev/ttyUSB7"}],
        servos=[{"joint": "gripper", "id": 9}],
        safety={"soft_limits": {"wrist_roll": [-1.0, 1.0]}},
    )
    mine, base = load_config(path), load_config("so101_leader")
    assert mine.urdf == ROBOTS_DIR / "so101.urdf"  # the base's, though nothing is beside it
    assert mine.buses[0].port == "/dev/ttyUSB7"
    assert mine.buses[0].model_copy(update={"port": base.buses[0].port}) == base.buses[0]
    gripper = {s.joint: s for s in mine.servos}["gripper"]
    assert gripper.id == 9 and gripper.torque_limit == base.servos[-1].torque_limit
    assert [s.id for s in mine.servos[:5]] == [1, 2, 3, 4, 5]
    assert mine.safety.soft_limits == {"wrist_roll": (-1.0, 1.0)}
    assert mine.safety.velocity_limit == base.safety.velocity_limit
    assert mine.lead == base.lead and mine.name == base.name


def test_an_extends_config_copied_to_another_folder_runs(tmp_path: Path) -> None:
    _extending(tmp_path, "so101_follower", name="my_so101", home={"elbow_flex": 0.2})
    ran = _hilbot("run", "my_arm.yaml", *RUN, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr


def test_extends_may_name_a_yaml_beside_it(tmp_path: Path) -> None:
    shutil.copy(config_path("koch_v1_1_leader"), tmp_path / "base.yaml")
    path = _extending(tmp_path, "base.yaml", buses=[{"name": "main", "port": "/dev/ttyX"}])
    assert load_config(path).buses[0].port == "/dev/ttyX"


@pytest.mark.parametrize(
    ("fields", "where", "problem"),
    [
        ({}, "extends", "no shipped robot"),
        ({"servos": [{"joint": "gripper", "id": 300}]}, "servos[5].id", "less than or equal"),
        ({"buses": [{"name": "main", "baudrate": -1}]}, "buses[0].baudrate", "greater than"),
        ({"servos": [{"joint": "elbow", "id": 8}]}, "servos[6]", "required field is missing"),
    ],
    ids=["unknown base", "bad id", "bad baud", "new servo without a model"],
)
def test_a_bad_extends_config_names_the_file_and_field(
    fields: dict[str, object],
    where: str,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    hilbot_main: Callable[..., CliResult],
) -> None:
    base = "no_such_robot" if not fields else "so101_follower"
    path = _extending(tmp_path, base, **fields)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: {where}") and problem in text, text
    monkeypatch.chdir(tmp_path)  # the command line, in this process: refused before a bus
    ran = hilbot_main("run", str(path), "--backend", "virtual", "--no-mqtt")
    assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, ran.stderr


def test_an_extends_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match="leads back to itself"):
        load_config(tmp_path / "a.yaml")


def test_merge_keys_named_lists_and_replaces_the_rest() -> None:
    base = {
        "servos": [{"joint": "a", "id": 1, "model": "M"}, {"joint": "b", "id": 2}],
        "home": {"a": 0.1, "b": 0.2},
        "safety": {"soft_limits": {"a": [-1, 1]}, "velocity_limit": 1.0},
    }
    over = {
        "servos": [{"joint": "b", "id": 7}, {"joint": "c", "id": 3}],
        "home": {"b": 0.5},
        "safety": {"soft_limits": {"a": [-2, 2]}},
    }
    assert merge(base, over) == {
        "servos": [
            {"joint": "a", "id": 1, "model": "M"},
            {"joint": "b", "id": 7},
            {"joint": "c", "id": 3},
        ],
        "home": {"a": 0.1, "b": 0.5},
        "safety": {"soft_limits": {"a": [-2, 2]}, "velocity_limit": 1.0},
    }
