"""`hilbot run` end to end, in-process: sim backend, trajectories, stats, errors."""

from __future__ import annotations

import json

import yaml

from hilbot.driver.cli import main


def test_run_sim_with_a_trajectory_writes_stats(tmp_path, capsys):
    traj = tmp_path / "wave.yaml"
    traj.write_text(
        yaml.safe_dump(
            {
                "loop": True,
                "waypoints": [
                    {"t": 0.0, "joints": {"joint1": 0.0}},
                    {"t": 0.5, "joints": {"joint1": 0.3}},
                ],
            }
        )
    )
    stats = tmp_path / "stats.json"
    code = main(
        [
            "run",
            "openmanipulator_x",
            "--duration",
            "1.0",
            "--enable",
            "--no-mqtt",
            "--trajectory",
            str(traj),
            "--stats",
            str(stats),
        ]
    )
    assert code == 0
    data = json.loads(stats.read_text())
    assert data["mode"] == "armed"
    assert data["cycles"] > 50
    assert data["faults"] == []
    assert "armed" in capsys.readouterr().out


def test_run_ends_with_a_finite_trajectory(tmp_path):
    traj = tmp_path / "t.csv"
    traj.write_text("t,joint1\n0,0\n0.3,0.1\n")
    assert main(["run", "--no-mqtt", "--enable", "--trajectory", str(traj)]) == 0


def test_bad_config_exits_2_with_the_field(tmp_path, capsys, config_data_of):
    data = config_data_of("openmanipulator_x")
    data["servos"][0]["id"] = 12
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--no-mqtt", "--duration", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "servos[1].id" in err and "duplicate servo id 12" in err


def test_rate_the_bus_cannot_carry_is_refused_on_a_bus_but_not_in_sim(capsys):
    code = main(["run", "--backend", "dynamixel", "--rate", "5000", "--no-mqtt"])
    assert code == 2
    assert "rate_hz" in capsys.readouterr().err
    assert main(["run", "--rate", "1000", "--duration", "0.3", "--no-mqtt"]) == 0


def test_missing_trajectory_file(capsys):
    assert main(["run", "--trajectory", "nowhere.yaml", "--no-mqtt"]) == 2
    assert "nowhere.yaml" in capsys.readouterr().err


def test_run_on_the_virtual_bus_through_the_real_backend(tmp_path):
    # The virtual bus runs in a `hilbot sim-bus` child process; the real backend drives it.
    stats = tmp_path / "stats.json"
    code = main(
        [
            "run",
            "--backend",
            "virtual",
            "--rate",
            "50",
            "--duration",
            "1.0",
            "--enable",
            "--no-mqtt",
            "--stats",
            str(stats),
        ]
    )
    assert code == 0
    data = json.loads(stats.read_text())
    assert data["mode"] == "armed" and data["cycles"] > 10
