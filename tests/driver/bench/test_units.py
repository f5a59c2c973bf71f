"""Small pieces: pose-target round trips, teleop traces, the progress line, fault injection."""

import io
import logging

import numpy as np
import pytest

from hilbot.driver.bench.errors import ScenarioError
from hilbot.driver.bench.pose_targets import OrientationKind, join_pose_target, split_pose_target
from hilbot.driver.bench.runner import apply_fault
from hilbot.driver.bench.scenario import FaultAction, TeleopStep
from hilbot.driver.bench.segments import StepContext, load_trace
from hilbot.driver.progress import Progress
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.sim.faults import ServoFaults

POSITION = np.array([0.1, -0.2, 0.3])
ROTATION = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def _pose():
    pose = np.eye(4)
    pose[:3, :3] = ROTATION
    pose[:3, 3] = POSITION
    return pose


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        (POSITION, OrientationKind.POSITION),
        ((POSITION, None), OrientationKind.POSITION),
        ((POSITION, np.array([0.0, 0.0, 1.0])), OrientationKind.AXIS),
        ((POSITION, np.array([0.5, 0.5, 0.5, 0.5])), OrientationKind.QUATERNION),
        ((POSITION, ROTATION), OrientationKind.MATRIX),
        (_pose(), OrientationKind.TRANSFORM),
    ],
    ids=["position", "no-orientation", "axis", "quaternion", "matrix", "transform"],
)
def test_pose_targets_survive_the_recording_format(target, kind):
    position, got_kind, orientation = split_pose_target(target)
    assert got_kind is kind
    np.testing.assert_array_equal(position, POSITION)
    back = join_pose_target(position, got_kind, orientation)
    if isinstance(target, tuple) and target[1] is not None:
        np.testing.assert_array_equal(back[0], target[0])
        np.testing.assert_array_equal(back[1], target[1])
    elif isinstance(target, tuple):
        np.testing.assert_array_equal(back, target[0])
    else:
        np.testing.assert_array_equal(back, target)


def _ctx(tmp_path):
    return StepContext(
        joints={}, ee={"arm": np.array([0.2, 0.0, 0.1])}, limits={}, home={}, base_dir=tmp_path
    )


def test_teleop_trace_from_csv_is_shifted_to_the_tool_and_sped_up(tmp_path):
    (tmp_path / "t.csv").write_text("t,chain,x,y,z\n0,arm,1,1,1\n1,arm,1,1.02,1\n2,arm,1,1,1\n")
    step = TeleopStep(kind="teleop", file="t.csv", speed=2.0)
    trace = load_trace(step, _ctx(tmp_path))
    assert trace.duration == pytest.approx(1.0)
    np.testing.assert_allclose(trace.at(0.0).position, [0.2, 0.0, 0.1])
    np.testing.assert_allclose(trace.at(0.5).position, [0.2, 0.02, 0.1])
    np.testing.assert_allclose(trace.at(0.25).position, [0.2, 0.01, 0.1])


def test_teleop_trace_from_a_recording(tmp_path, synthetic):
    recording = synthetic(n=40)
    recording.channels["ee_target"][:, 0, 0] += np.linspace(0.0, 0.01, 40)
    recording.save(tmp_path / "session.npz")
    step = TeleopStep(kind="teleop", file="session.npz", relative=False)
    trace = load_trace(step, _ctx(tmp_path))
    assert trace.chain == "arm"
    np.testing.assert_allclose(trace.at(trace.duration).position, [0.21, 0.0, 0.1])


@pytest.mark.parametrize(
    ("content", "words"),
    [("a,b\n1,2\n", "t,chain,x,y,z"), ("t,chain,x,y,z\n0,arm,1,1,oops\n", "not a number")],
    ids=["header", "value"],
)
def test_bad_teleop_files_are_named(tmp_path, content, words):
    (tmp_path / "t.csv").write_text(content)
    with pytest.raises(ScenarioError, match=words) as info:
        load_trace(TeleopStep(kind="teleop", file="t.csv"), _ctx(tmp_path))
    assert info.value.path == tmp_path / "t.csv"


def test_progress_shows_on_a_terminal_only():
    stream = io.StringIO()
    quiet = Progress(10, stream=stream)  # a StringIO is not a terminal
    quiet.update(5, "x")
    quiet.close()
    assert stream.getvalue() == ""
    loud = Progress(10, stream=stream, enabled=True)
    loud.update(10, "step 1/1 hold")
    loud.close()
    assert "100.0% step 1/1 hold" in stream.getvalue()
    assert stream.getvalue().endswith("\n")


def test_a_log_record_does_not_run_into_the_progress_line():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        bar = Progress(10, stream=stream, enabled=True)
        bar.update(3, "step 1/2 hold")
        logging.getLogger("hilbot.test").warning("watchdog tripped")
        bar.update(10, "step 2/2 hold")
        bar.close()
        logging.getLogger("hilbot.test").warning("after the bar")
    finally:
        root.removeHandler(handler)
    lines = stream.getvalue().split("\n")
    assert lines[0].endswith("step 1/2 hold\x1b[K\r\x1b[Kwatchdog tripped")
    assert lines[1].endswith("100.0% step 2/2 hold\x1b[K")
    assert lines[2] == "after the bar"  # the bar's filter is gone: nothing to erase
    assert not handler.filters


def test_faults_are_set_and_cleared_on_the_servo_record():
    record = ServoFaults(12)
    apply_fault(record, FaultAction.DROP_REPLIES, 0.3, clear=False)
    assert record.drop_rate == 0.3
    apply_fault(record, FaultAction.DROP_REPLIES, 0.3, clear=True)
    assert record.drop_rate == 0.0
    apply_fault(record, FaultAction.UNPLUG, 1.0, clear=False)
    assert not record.answers
    apply_fault(record, FaultAction.UNPLUG, 1.0, clear=True)
    assert record.answers
    apply_fault(record, FaultAction.OVERLOAD, 1.0, clear=False)
    assert record.hardware_error == HardwareErrorFlags.OVERLOAD
