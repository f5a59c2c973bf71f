"""A recorded run replays to identical commands; a changed recording is caught."""

import asyncio

import pytest

from hilbot.driver.bench.backends import BackendKind, ClockKind
from hilbot.driver.bench.compare import compare_commands
from hilbot.driver.bench.recording import Recording
from hilbot.driver.bench.replay import inferred_commands, replay
from hilbot.driver.bench.runner import RunOptions, run_bench
from hilbot.driver.bench.scenario import load_scenario, resolve_scenario
from hilbot.driver.cli import main
from hilbot.driver.runtime.config import load_config


@pytest.fixture(scope="module")
def config():
    return load_config("openmanipulator_x")


async def _record(config, name, scale, tmp_path):
    path = resolve_scenario(name)
    scenario = load_scenario(path).scaled(scale)
    options = RunOptions(base_dir=path.parent, config_path="openmanipulator_x", clock="fake")
    recording = await run_bench(config, scenario, BackendKind.SIM, ClockKind.FAKE, options)
    return Recording.load(recording.save(tmp_path / f"{name}.npz"))


@pytest.mark.parametrize(
    ("name", "scale"), [("openmanipulator_circle", 0.15), ("openmanipulator_faults", 0.3)]
)
async def test_a_recorded_run_replays_to_identical_commands(config, name, scale, tmp_path):
    recording = await _record(config, name, scale, tmp_path)
    again = await replay(recording, config, progress=False)
    diff = compare_commands(recording, again, atol=0.0)
    assert diff.identical, diff
    assert diff.cycles_compared == recording.n_cycles
    assert (again["mode"] == recording["mode"]).all()


async def test_a_recording_that_starts_after_idle_cycles_replays_row_for_row(config, tmp_path):
    # A recorder attached to a runtime that had already run a few cycles: the replay
    # idles through them, then records from the same cycle, so rows line up.
    recording = await _record(config, "openmanipulator_step", 0.1, tmp_path)
    recording.channels["cycle"] = recording["cycle"] + 4
    recording.header.commands = [{**c, "cycle": c["cycle"] + 4} for c in recording.header.commands]
    again = await replay(recording, config, progress=False)
    assert again["cycle"][0] == recording["cycle"][0] == 5
    diff = compare_commands(recording, again, atol=0.0)
    assert diff.identical, diff


def test_replay_reports_a_changed_target(config, tmp_path, capsys):
    # Sync test: the command line runs its own event loop.
    recording = asyncio.run(_record(config, "openmanipulator_circle", 0.1, tmp_path))
    # Nudge one recorded pose target by 2 cm in the middle of the circle.
    new_rows = recording["target_new"][:, 0].nonzero()[0]
    row = int(new_rows[len(new_rows) // 2])
    recording.channels["ee_target"][row, 0, 2] += 0.02
    changed = recording.save(tmp_path / "changed.npz")
    code = main(["replay", str(changed), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert "commands differ" in err and "joint" in err
    # ... and the unchanged file replays clean through the command line too.
    assert main(["replay", str(tmp_path / "openmanipulator_circle.npz"), "--quiet"]) == 0


def test_replay_rejects_a_file_that_is_not_a_recording(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"nope")
    assert main(["replay", str(bad)]) == 2
    assert "not a numpy .npz recording" in capsys.readouterr().err


def test_commands_are_inferred_from_mode_changes(synthetic):
    recording = synthetic(n=50, fault_at=30)
    recording.channels["mode"][:10] = 0  # disarmed, then armed at row 10
    recording.channels["mode"][40:] = 0  # faulted, then reset to disarmed at row 40
    assert inferred_commands(recording) == [
        {"cycle": 11, "command": "enable"},
        {"cycle": 41, "command": "reset"},
    ]


def test_hilbot_run_record_replays(tmp_path, capsys):
    trajectory = tmp_path / "traj.yaml"
    trajectory.write_text(
        "kind: pose\nchain: arm\nwaypoints:\n"
        "  - {t: 0.0, position: [0.16, 0.00, 0.24]}\n"
        "  - {t: 0.6, position: [0.16, 0.03, 0.22]}\n"
    )
    record = tmp_path / "run.npz"
    args = ["run", "openmanipulator_x", "--no-mqtt", "--no-status", "--enable"]
    args += ["--trajectory", str(trajectory), "--duration", "0.8", "--record", str(record)]
    assert main(args) == 0
    assert "recorded" in capsys.readouterr().out
    recording = Recording.load(record)
    assert recording.header.config_path == "openmanipulator_x"
    assert recording.header.modes[recording["mode"][-1]] == "armed"
    assert recording["target_new"][:, 0].any()  # the trajectory's pose targets were recorded
    assert main(["replay", str(record), "--quiet"]) == 0
    assert "commands identical" in capsys.readouterr().out
