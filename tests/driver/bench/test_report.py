import json

import numpy as np
import pytest

from hilbot.driver.bench import (
    Recording,
    RecordingError,
    Thresholds,
    build_report,
    check_thresholds,
    compare_commands,
    compare_runs,
    format_summary,
    plot_comparison,
    write_outputs,
)


def test_recording_round_trips_through_npz(synthetic, tmp_path):
    rec = synthetic(clamps=2)
    path = rec.save(tmp_path / "r.npz")
    back = Recording.load(path)
    assert back.header.joint_names == rec.header.joint_names
    assert back.header.scenario == {"name": "synthetic"}
    assert back.header.versions["numpy"] == np.__version__
    for name, array in rec.channels.items():
        np.testing.assert_array_equal(back[name], array)
    assert back.clamp_events.shape == (2, 5)


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"not a zip", "not a numpy"), (None, "no 'header'")],
    ids=["garbage", "no-header"],
)
def test_loading_a_bad_file_names_the_problem(synthetic, tmp_path, content, reason):
    path = tmp_path / "bad.npz"
    if content is None:
        np.savez_compressed(path, t=np.zeros(3))
    else:
        path.write_bytes(content)
    with pytest.raises(RecordingError) as info:
        Recording.load(path)
    assert reason in info.value.reason
    assert info.value.path == path


def test_a_channel_of_the_wrong_shape_is_rejected(synthetic, tmp_path):
    rec = synthetic(n=20)
    rec.channels["q_command"] = rec.channels["q_command"][:, :1]
    with pytest.raises(RecordingError, match="q_command"):
        rec.save(tmp_path / "r.npz") and Recording.load(tmp_path / "r.npz")


def test_tracking_errors_match_the_constructed_offsets(synthetic):
    report = build_report(synthetic(joint_offset=0.01, ee_offset=0.002))
    for stats in report.joints:
        assert stats.rms == pytest.approx(0.01)
        assert stats.samples == 199
    (ee,) = report.end_effectors
    assert ee.rms == pytest.approx(0.002)
    assert ee.max == pytest.approx(0.002)


def test_timing_and_rate(synthetic):
    report = build_report(synthetic(lateness=50e-6))
    assert report.timing.achieved_rate_hz == pytest.approx(100.0, rel=1e-3)
    assert 30e-6 < report.timing.lateness_p50 < 70e-6
    assert sum(report.timing.histogram_counts) == 200
    assert report.timing.overruns == 0


def test_faults_and_clamps_are_counted(synthetic):
    report = build_report(synthetic(clamps=3, fault_at=150))
    assert report.clamp_events == 3
    assert report.clamps_by_joint == {"joint1": {"delta": 3}}
    assert [(f.joint, f.flags, f.cycle) for f in report.faults] == [("joint2", "overload", 151)]
    assert report.final_mode == "faulted"
    assert [m for _, m in report.mode_changes] == ["armed", "faulted"]


def test_thresholds_pass_and_fail_with_the_worst_value(synthetic):
    report = build_report(synthetic(ee_offset=0.002, clamps=1))
    ok = check_thresholds(report, Thresholds(ee_rms_max=0.005, lateness_p99_max=1e-3))
    assert all(r.passed for r in ok)
    missed = check_thresholds(
        report, Thresholds(ee_rms_max=0.001, clamp_events_max=0, final_mode="armed")
    )
    assert [(r.name, r.passed) for r in missed] == [
        ("ee_rms_max", False),
        ("clamp_events_max", False),
        ("command_failures_max", True),
        ("final_mode", True),
    ]
    assert "worst: arm" in missed[0].describe()
    assert "MISSED" in missed[0].describe()


def test_write_outputs_writes_summary_plots_and_recording(synthetic, tmp_path):
    outcome = write_outputs(synthetic(), Thresholds(ee_rms_max=0.001), tmp_path)
    assert not outcome.passed
    for name in ("recording", "summary", "joints", "lateness", "end_effector"):
        assert outcome.files[name].exists(), name
        assert outcome.files[name].stat().st_size > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["passed"] is False
    assert summary["thresholds"][0]["name"] == "ee_rms_max"
    assert summary["report"]["end_effectors"][0]["rms"] == pytest.approx(0.002)
    assert (tmp_path / "joints.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ee_rms_max" in format_summary(outcome)


def test_compare_commands_finds_the_first_difference(synthetic):
    a = synthetic()
    b = synthetic()
    assert compare_commands(a, b).identical
    b.channels["q_command"][120, 1] += 1e-3
    diff = compare_commands(a, b)
    assert not diff.identical
    assert diff.first_cycle == 120
    assert diff.joints_differing == ["joint2"]
    assert diff.max_abs == pytest.approx(1e-3)


def test_compare_runs_and_plot(synthetic, tmp_path):
    a = synthetic(joint_offset=0.0)
    b = synthetic(joint_offset=0.01)
    cmp = compare_runs(a, b)
    assert cmp.measured_diff[0].rms == pytest.approx(0.01, rel=1e-2)
    json.dumps(cmp.to_dict())
    assert plot_comparison(a, b, tmp_path / "c.png").stat().st_size > 0


def test_a_failed_command_fails_the_run_by_default(synthetic):
    recording = synthetic()
    recording.header.commands = [{"cycle": 1, "command": "enable", "error": "rx timeout"}]
    (result,) = check_thresholds(build_report(recording), Thresholds())
    assert (result.name, result.passed) == ("command_failures_max", False)
    assert "enable at cycle 1: rx timeout" in result.describe()
    assert check_thresholds(build_report(recording), Thresholds(command_failures_max=None)) == []


def test_runs_are_compared_at_equal_times_not_equal_cycles(synthetic):
    from hilbot.driver.bench.recording import Recording

    a = synthetic(n=200)
    # The same motion, but a busy host ran only every other cycle.
    channels = {k: (v[::2] if k != "clamp_events" else v) for k, v in a.channels.items()}
    b = Recording(header=a.header, channels=channels)
    cmp = compare_runs(a, b)
    assert cmp.measured_diff[0].rms < 1e-4  # linear interpolation of a slow sine
    shifted = compare_runs(a, synthetic(n=200, joint_offset=0.02))
    assert shifted.measured_diff[0].rms == pytest.approx(0.01, rel=0.05)
