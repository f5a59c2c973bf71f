"""`hilbot run` end to end: sim and virtual backends, trajectories, stats, status line, errors."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import yaml

from hilbot.driver.cli import main
from hilbot.driver.commands.run import status_text
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import Fault, FaultKind, RuntimeState
from hilbot.driver.runtime.stats import LoopStats


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
    code = main(["run", "--backend", "hardware", "--rate", "5000", "--no-mqtt"])
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


def test_run_with_a_pose_trajectory_reports_ik_time(tmp_path):
    traj = tmp_path / "reach.csv"
    traj.write_text("t,x,y,z\n0,0.20,0.00,0.15\n0.5,0.20,0.05,0.15\n")
    stats = tmp_path / "stats.json"
    args = ["run", "--no-mqtt", "--enable", "--trajectory", str(traj), "--duration", "1.0"]
    assert main([*args, "--stats", str(stats)]) == 0
    data = json.loads(stats.read_text())
    assert data["ik_time_s"]["max"] > 0.0  # the chain was solved on real time
    for key in ("rate", "lateness_s", "cycle_time_s", "overhead_s", "overruns", "bus_errors"):
        assert key in data


def test_live_status_line_on_a_terminal():
    # stderr on a pseudo-terminal, as at a shell: the line is redrawn in place.
    controller, terminal = pty.openpty()
    args = [sys.executable, "-m", "hilbot", "run", "--no-mqtt", "--enable", "--duration", "1.5"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    out, _ = proc.communicate(timeout=60)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal's other end is closed: all read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    screen = b"".join(chunks).decode()
    assert proc.returncode == 0
    lines = [line for line in screen.split("\r") if "Hz" in line]
    assert len(lines) >= 2  # refreshed while running
    assert all("armed" in line and "late p50" in line and "faults: none" in line for line in lines)
    assert "armed" in out.decode()  # the final summary on stdout
    assert "shutdown: torque off on 5 servos" in out.decode()


def test_status_text_shows_mode_watchdog_and_faults():
    state = RuntimeState(
        mode=Mode.FAULTED,
        joints=None,
        command={},
        poses={},
        faults=(Fault(0.0, FaultKind.HARDWARE, "joint2", "overload"),),
        fault_log=(),
        clamps=(),
        clamp_counts={},
        watchdog_tripped=True,
        homing=False,
        stats=LoopStats(target_rate=200.0, rate=199.5, overruns=3, bus_errors=2),
    )
    text = status_text(state)
    assert text.startswith("faulted")
    assert "watchdog-hold" in text and "199.5/200 Hz" in text
    assert "overruns 3" in text and "bus errors 2" in text
    assert "faults: joint2: overload" in text


def test_demo_without_mqtt_is_refused(capsys):
    assert main(["run", "--no-mqtt", "--demo", "circle", "--duration", "0.1"]) == 2
    assert "--demo" in capsys.readouterr().err


def test_trajectory_without_enable_warns(tmp_path, caplog):
    traj = tmp_path / "t.csv"
    traj.write_text("t,joint1\n0,0\n0.1,0.1\n")
    assert main(["run", "--no-mqtt", "--trajectory", str(traj)]) == 0
    assert "without --enable" in caplog.text


def test_the_run_says_it_holds_when_the_config_keeps_torque_on(tmp_path, capsys, config_data_of):
    data = config_data_of("openmanipulator_x")
    data["safety"]["torque_off_on_shutdown"] = False
    path = tmp_path / "keep.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--no-mqtt", "--enable", "--duration", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "shutdown: holding the last goal, torque left on on 5 servos" in out
