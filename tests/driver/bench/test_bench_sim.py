"""Every shipped scenario on the simulator (fake clock, shortened), and the CLI's exit codes."""

import json

import numpy as np
import pytest

from hilbot.driver.bench.backends import BackendKind, ClockKind
from hilbot.driver.bench.report import write_outputs
from hilbot.driver.bench.runner import RunOptions, run_bench
from hilbot.driver.bench.scenario import load_scenario, resolve_scenario, shipped_scenarios
from hilbot.driver.cli import main
from hilbot.driver.runtime.config import load_config

SCALE = 0.1  # shortened runs: the scenario's shape, a fraction of its duration


@pytest.fixture(scope="module")
def config():
    return load_config("openmanipulator_x")


@pytest.mark.parametrize("name", shipped_scenarios())
async def test_shipped_scenario_runs_on_the_simulator(config, name, tmp_path):
    path = resolve_scenario(name)
    scenario = load_scenario(path).scaled(SCALE)
    options = RunOptions(base_dir=path.parent, config_path="openmanipulator_x", clock="fake")
    recording = await run_bench(config, scenario, BackendKind.SIM, ClockKind.FAKE, options)
    rate = config.rate_hz
    assert recording.n_cycles >= int(scenario.duration() * rate) - 2
    assert recording.header.scenario["name"] == name
    outcome = write_outputs(recording, scenario.thresholds, tmp_path, plots=False)
    for key in ("recording", "summary"):
        assert outcome.files[key].stat().st_size > 0, key
    assert not list(tmp_path.glob("*.png"))  # plots=False draws none
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["report"]["cycles"] == recording.n_cycles
    assert summary["backend"] == "sim"
    # Commands never leave the joint limits, whatever the scenario does.
    commands = recording["q_command"]
    names = recording.header.joint_names
    from hilbot.driver.runtime.validation import load_robot

    robot = load_robot(config.urdf)
    for j, joint in enumerate(names):
        lower, upper = robot.joints[joint].bounds()
        column = commands[:, j][np.isfinite(commands[:, j])]
        assert column.min() >= lower - 1e-9 and column.max() <= upper + 1e-9, joint
    if name == "openmanipulator_circle":
        _check_circle(recording)


async def test_the_plots_of_a_shipped_scenario_show_its_modes_faults_and_tool_path(
    config, tmp_path
):
    # The one test that draws a bench run's plots (drawing is most of a shortened run's time):
    # the fault scenario has every mode a run can shade, injected faults, the hardware errors
    # they raise, and an end effector to trace.
    path = resolve_scenario("openmanipulator_faults")
    scenario = load_scenario(path).scaled(SCALE)
    options = RunOptions(base_dir=path.parent, config_path="openmanipulator_x", clock="fake")
    recording = await run_bench(config, scenario, BackendKind.SIM, ClockKind.FAKE, options)
    assert recording.header.faults and recording["hw_errors"].any()
    outcome = write_outputs(recording, scenario.thresholds, tmp_path)
    for key in ("recording", "summary", "joints", "lateness", "end_effector", "overview"):
        assert outcome.files[key].stat().st_size > 0, key
        if key not in ("recording", "summary"):
            assert outcome.files[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", key


def _check_circle(recording):
    """The target is a 3 cm circle in a horizontal plane; the tool follows it closely."""
    target = recording["ee_target"][:, 0]
    has_target = np.all(np.isfinite(target), axis=1)
    assert has_target.sum() > 0.5 * recording.n_cycles
    extent = np.ptp(target[has_target], axis=0)
    np.testing.assert_allclose(extent, [0.06, 0.06, 0.0], atol=1e-3)
    error = np.linalg.norm(recording["ee_measured"][:, 0] - target, axis=1)[has_target]
    # A circle ten times faster than the scenario's asks more acceleration and jerk than the
    # configured limits allow: the motion layer cuts inside it (never clamped), so the tool
    # stays near the path, within the circle's diameter (the full-length circle tracks
    # within 5 mm RMS: 1.5 mm measured).
    assert np.sqrt(np.mean(error**2)) < 0.08
    assert recording.clamp_events.shape[0] == 0


async def test_fault_scenario_disarms_and_recovers(config):
    path = resolve_scenario("openmanipulator_faults")
    scenario = load_scenario(path).scaled(0.5)
    recording = await run_bench(
        config, scenario, BackendKind.SIM, ClockKind.FAKE, RunOptions(clock="fake")
    )
    modes = [recording.header.modes[m] for m in recording["mode"]]
    assert "faulted" in modes
    assert modes[-1] == "disarmed"
    assert recording["bus_errors"][-1] > 0  # the dropped replies and the unplug were seen
    overload = recording["hw_errors"][:, recording.header.joint_names.index("joint4")]
    assert overload.any()
    actions = [f["action"] for f in recording.header.faults]
    assert actions.count("overload") == 2  # injected, then cleared
    assert [c["command"] for c in recording.header.commands][-4:] == [
        "reboot",
        "reset",
        "enable",
        "disable",
    ]


def _write_scenario(tmp_path, thresholds):
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "name: tiny\n"
        "steps:\n"
        "  - {kind: command, command: enable}\n"
        "  - {kind: step, deltas: {joint1: 0.2}, hold: 0.2}\n"
        "  - {kind: command, command: disable}\n"
        f"thresholds: {json.dumps(thresholds)}\n"
    )
    return path


def _bench(tmp_path, scenario, *extra):
    out = tmp_path / "out"
    args = ["bench", "openmanipulator_x", "--scenario", str(scenario), "--out", str(out)]
    return main([*args, "--clock", "fake", "--no-plots", "--quiet", *extra]), out


def test_cli_passes_when_thresholds_are_met(tmp_path, capsys):
    scenario = _write_scenario(tmp_path, {"faults_max": 0, "final_mode": "disarmed"})
    code, out = _bench(tmp_path, scenario)
    assert code == 0, capsys.readouterr()
    assert json.loads((out / "summary.json").read_text())["passed"] is True


def test_cli_fails_and_names_the_missed_thresholds(tmp_path, capsys):
    # A 0.2 rad step cannot be tracked within 1 µrad, and the scenario has no stop in it.
    scenario = _write_scenario(tmp_path, {"stops_min": 1, "joint_max_max": 1e-6})
    code, out = _bench(tmp_path, scenario)
    captured = capsys.readouterr()
    assert code == 1
    assert "thresholds missed on sim: joint_max_max, stops_min" in captured.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] is False
    assert {t["name"] for t in summary["thresholds"] if not t["passed"]} == {
        "stops_min",
        "joint_max_max",
    }


def test_cli_rejects_a_bad_scenario_with_its_field(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps:\n  - {kind: hold, duration: -1}\n")
    code, _ = _bench(tmp_path, bad)
    assert code == 2
    assert "steps.0.hold.duration" in capsys.readouterr().err


def test_cli_refuses_a_fake_clock_on_the_virtual_bus(tmp_path, capsys):
    scenario = _write_scenario(tmp_path, {})
    code, _ = _bench(tmp_path, scenario, "--backend", "virtual")
    assert code == 2
    assert "--clock fake works with the sim backend only" in capsys.readouterr().err


def test_cli_refuses_to_compare_a_backend_with_itself(tmp_path, capsys):
    scenario = _write_scenario(tmp_path, {})
    code, out = _bench(tmp_path, scenario, "--compare-backend", "sim")
    assert code == 2
    assert "--compare-backend sim is the --backend already" in capsys.readouterr().err
    assert not out.exists()


def test_cli_rejects_unknown_joints_and_chains_before_anything_moves(tmp_path, capsys):
    bad = tmp_path / "names.yaml"
    bad.write_text(
        "name: names\nsteps:\n"
        "  - {kind: step, deltas: {elbow: 0.1}}\n"
        "  - {kind: cartesian_line, chain: left_arm, offset: [0, 0, 0.01], duration: 1}\n"
    )
    code, out = _bench(tmp_path, bad)
    err = capsys.readouterr().err
    assert code == 2
    assert "steps.0.step.deltas: unknown joint 'elbow'" in err
    assert "steps.1.cartesian_line.chain: unknown chain 'left_arm'; known: arm" in err
    assert not out.exists()


class _CrashingBackend:
    """The simulator, whose reads break in an unexpected way after ``after`` reads."""

    def __init__(self, inner, after):
        self._inner = inner
        self._reads = 0
        self._after = after

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def __aenter__(self):
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc):
        await self._inner.__aexit__(*exc)

    async def read(self):
        self._reads += 1
        if self._reads > self._after:
            raise ZeroDivisionError("a bug below the runtime")
        return await self._inner.read()


async def test_a_crash_below_the_runtime_mid_scenario_faults_and_the_run_goes_on(config):
    from hilbot.driver.bench.backends import make_clock, make_sim_backend
    from hilbot.driver.bench.runner import ScenarioRunner
    from hilbot.driver.runtime.loop import Runtime
    from hilbot.driver.runtime.safety import Mode
    from hilbot.driver.runtime.state import FaultKind

    clock = make_clock(ClockKind.FAKE)
    bench = make_sim_backend(config, clock)
    bench.backend = _CrashingBackend(bench.backend, after=60)
    scenario = load_scenario("openmanipulator_sweep").scaled(0.1)
    # The loop no longer dies of it (issue 11): the robot faults into its safe state, the
    # scenario runs to its end, and every cycle is recorded.
    async with Runtime(config, bench.backend, clock=clock) as runtime:
        recording = await ScenarioRunner(runtime, bench, scenario, RunOptions(clock="fake")).run()
        state = runtime.state()
    assert recording.n_cycles > 60
    assert state.mode is Mode.FAULTED
    assert any(
        f.kind is FaultKind.INTERNAL and "ZeroDivisionError" in f.detail for f in state.faults
    )


@pytest.mark.parametrize("name", ["hardware", "dynamixel"])  # dynamixel: the old name
def test_fault_steps_are_refused_on_hardware_before_a_port_opens(name, tmp_path, capsys):
    args = ["bench", "openmanipulator_x", "--scenario", "openmanipulator_faults"]
    code = main([*args, "--backend", name, "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 2
    assert "step 2 (fault) cannot run on the hardware backend" in capsys.readouterr().err


def test_a_teleop_file_that_cannot_be_read_is_refused_before_the_run(tmp_path, capsys):
    scenario = tmp_path / "teleop.yaml"
    scenario.write_text(
        "name: teleop\nsteps:\n"
        "  - {kind: command, command: enable}\n"
        "  - {kind: teleop, file: missing.csv, chain: arm}\n"
    )
    code, out = _bench(tmp_path, scenario)
    err = capsys.readouterr().err
    assert code == 2
    assert "steps.1.teleop.file: missing.csv: cannot read: No such file or directory" in err
    assert not out.exists()


def test_a_real_arm_whose_port_does_not_open_is_a_clear_failure(tmp_path, capsys):
    args = ["bench", "openmanipulator_x", "--scenario", "openmanipulator_circle", "--quiet"]
    port = str(tmp_path / "ttyUSB9")
    code = main([*args, "--backend", "hardware", "--port", port, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 3
    assert f"cannot open the serial port {port}: " in err
    assert "--port" in err
