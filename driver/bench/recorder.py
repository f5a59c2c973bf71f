"""Record every control cycle of a running ``Runtime`` into a ``Recording``.

The recorder is a cycle listener: it copies the cycle's record into
preallocated numpy rows (no I/O, no per-cycle allocation beyond what the
record's own fields hold). Forward kinematics of the measured positions is
computed once, vectorised, when the recording is finished.

With a :class:`~hilbot.driver.bench.stream.RecordingStream`, about once a second
it also hands the rows finished since the last time to the stream's writer
thread (a queue put, no I/O in the loop), so that a crash keeps the recording.

``hilbot run --record FILE`` uses :func:`attach`::

    recorder = attach(runtime, "run.npz", config_path="openmanipulator_x")
    ...                                   # the runtime runs, streaming to run.npz.partial
    recorder.save()                       # after the runtime stopped: run.npz
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hilbot.driver.bench.buffer import CycleBuffer
from hilbot.driver.bench.pose_targets import split_pose_target
from hilbot.driver.bench.recording import ClampKind, Recording, RecordingHeader
from hilbot.driver.bench.stream import Chunk, RecordingStream, header_copy
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import ClampKind as SafetyClampKind
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.state import CycleRecord
from hilbot.driver.runtime.targets import JOINTS

MODES: tuple[str, ...] = tuple(m.value for m in Mode)
_MODE_INDEX = {m: i for i, m in enumerate(Mode)}
_CLAMP_FLAGS = {
    SafetyClampKind.NON_FINITE: ClampKind.NONFINITE,
    SafetyClampKind.JOINT_LIMIT: ClampKind.LIMIT,
    SafetyClampKind.MAX_DELTA: ClampKind.DELTA,
    SafetyClampKind.VELOCITY: ClampKind.VELOCITY,
}


class Recorder:
    """A cycle listener that records a runtime's cycles.

    Args:
        runtime: the runtime to record (``start()`` adds the recorder as its cycle listener).
        header: metadata stored with the recording; its joint and chain names
            are taken from the runtime.
        capacity: rows to preallocate (the expected number of cycles).
        stream: stream the cycles to disk during the run (``None``: memory only).
    """

    def __init__(
        self,
        runtime: Runtime,
        header: RecordingHeader,
        capacity: int = 4096,
        stream: RecordingStream | None = None,
    ) -> None:
        self.runtime = runtime
        header.joint_names = tuple(runtime.joint_names)
        header.chain_names = tuple(runtime.chains)
        header.rate_hz = float(runtime.config.rate_hz)
        header.modes = MODES
        self.header = header
        self.buffer = CycleBuffer(header.joint_names, header.chain_names, capacity)
        self.path: Path | None = None
        self._previous: dict[str, Any] = {}
        self._t0: float | None = None
        self._attached = False
        self.stream = stream
        self._streamed = (0, 0)  # rows and clamp events handed to the stream
        self._streamed_at: float | None = None
        self._logged = (-1, -1)  # header commands and faults in the stream's header
        joints = runtime.state().joints
        if joints is not None:
            header.initial_positions = joints.positions()

    def start(self) -> Recorder:
        """Add this recorder as a cycle listener of its runtime; returns itself."""
        if not self._attached:
            self.runtime.add_cycle_listener(self)
            self._attached = True
        return self

    def __call__(self, rec: CycleRecord) -> None:
        """Copy one cycle (the runtime calls this at the end of every cycle)."""
        buf = self.buffer
        row = buf.next_row()
        a = buf.arrays
        if self._t0 is None:
            self._t0 = rec.deadline
        a["cycle"][row] = rec.cycle
        a["t"][row] = rec.deadline - self._t0
        a["lateness"][row] = rec.woke - rec.deadline
        a["cycle_time"][row] = rec.cycle_time
        a["ik_time"][row] = rec.ik_time
        a["mode"][row] = _MODE_INDEX[rec.mode]
        state = rec.state
        if state is not None:
            a["q_measured"][row] = state.position
            a["qd_measured"][row] = state.velocity
            a["effort"][row] = state.effort
            flags = state.hardware_errors
            if any(flags):  # rows start at zero: write only when a servo reports an error
                a["hw_errors"][row] = [int(f) for f in flags]
        else:
            a["q_measured"][row] = np.nan
            a["qd_measured"][row] = np.nan
        if rec.written:
            a["q_command"][row] = rec.command
            a["q_target"][row] = rec.desired
        a["bus_errors"][row] = self.runtime.stats.bus_errors
        self._targets(row, rec.targets)
        self._ik(row, rec.ik)
        for event in rec.clamps:
            j = buf.joint_index(event.joint)
            flag = int(_CLAMP_FLAGS.get(event.kind, ClampKind.LIMIT))
            a["clamped"][row, j] |= flag
            buf.clamp_events.append((event.cycle, j, flag, event.before, event.after))
        stream = self.stream
        if stream is not None and (
            self._streamed_at is None or rec.deadline - self._streamed_at >= stream.period
        ):  # the first cycle (with the header), then about once a period
            self._streamed_at = rec.deadline
            self._stream()

    def _stream(self) -> None:
        """Hand the rows finished since the last chunk to the stream (references only)."""
        assert self.stream is not None
        buf, header = self.buffer, self.header
        logged = (len(header.commands), len(header.faults))
        rows, events = self._streamed
        end, events_end = len(buf), len(buf.clamp_events)
        self.stream.submit(
            Chunk(
                arrays=dict(buf.arrays),
                start=rows,
                end=end,
                events=buf.clamp_events,
                events_start=events,
                events_end=events_end,
                header=header_copy(header) if logged != self._logged else None,
            )
        )
        self._streamed, self._logged = (end, events_end), logged

    def _targets(self, row: int, targets: Mapping[str, Any]) -> None:
        a, buf = self.buffer.arrays, self.buffer
        for slot, value in targets.items():
            is_new = value is not self._previous.get(slot)
            if slot == JOINTS:
                for joint, q in value.items():
                    a["q_joint_target"][row, buf.joint_index(joint)] = q
                a["target_new"][row, -1] = is_new
            elif slot == "home":
                continue  # the ``home`` command's goal: replayed as that command
            else:
                c = buf.chain_index(slot)
                position, kind, orientation = split_pose_target(value)
                a["ee_target"][row, c] = position
                a["ee_target_kind"][row, c] = kind
                a["ee_target_orientation"][row, c] = orientation
                a["target_new"][row, c] = is_new
        self._previous = dict(targets)

    def _ik(self, row: int, results: Mapping[str, Any]) -> None:
        a, buf = self.buffer.arrays, self.buffer
        for chain, result in results.items():
            positions = getattr(result, "positions", None) or {}
            for joint, q in positions.items():
                j = buf.joint_index(joint)
                if j >= 0:
                    a["q_ik"][row, j] = q
            residual = getattr(result, "residual", None)
            if residual is not None:
                a["ik_residual"][row, buf.chain_index(chain)] = residual

    def note_command(self, command: str) -> None:
        """Log a lifecycle command; it runs before the next cycle."""
        entry = {"cycle": self.runtime.stats.cycles + 1, "command": str(command)}
        self.header.commands.append(entry)

    def note_fault(self, fault: Mapping[str, Any]) -> None:
        """Log a fault injection; it applies from the next cycle."""
        self.header.faults.append({"cycle": self.runtime.stats.cycles + 1, **fault})

    def finish(self) -> Recording:
        """Stop recording and return the recording (with end-effector FK filled in)."""
        if self._attached:
            self.runtime.remove_cycle_listener(self)
            self._attached = False
        if self.stream is not None:
            self._stream()  # the last rows; the caller closes the stream
        recording = self.buffer.finish(self.header)
        fill_ee_measured(recording, self.runtime)
        return recording

    def save(self, path: str | Path | None = None) -> Path:
        """Finish and write the recording to ``path`` (default: the path given to ``attach``).

        Call it after the runtime stopped: it waits for the stream's writer. Once the file
        is written, the stream's partial folder is removed.

        Raises:
            RecordingError: the file could not be written (an earlier file at ``path`` is
                kept, and so is the partial folder).
        """
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("no path to save the recording to")
        recording = self.finish()
        if self.stream is not None:
            self.stream.close()
        saved = recording.save(target)
        if self.stream is not None:
            self.stream.discard()
        return saved


def fill_ee_measured(recording: Recording, runtime: Runtime) -> None:
    """Compute ``ee_measured`` from ``q_measured`` with the runtime's kinematic chains."""
    q = recording["q_measured"]
    names = recording.header.joint_names
    for c, chain_name in enumerate(recording.header.chain_names):
        config = next(ch for ch in runtime.config.chains if ch.name == chain_name)
        chain = runtime.robot.path_between(config.source_link, config.target_link)
        columns = [names.index(j.name) for j in chain.joints if j.name in names]
        if len(columns) != chain.dof or not q.shape[0]:
            continue  # multi-DoF joints: no flat mapping from recorded joints
        rows = np.all(np.isfinite(q[:, columns]), axis=1)
        if rows.any():
            poses = chain.fk_batch(q[rows][:, columns])
            recording.channels["ee_measured"][rows, c] = poses[:, :3, 3]


def run_header(
    runtime: Runtime,
    *,
    backend: str = "sim",
    config_path: str | None = None,
    clock: str = "monotonic",
) -> RecordingHeader:
    """The header of a recording of ``runtime`` outside a bench scenario (``hilbot run``)."""
    return RecordingHeader(
        joint_names=(),
        chain_names=(),
        rate_hz=0.0,
        backend=backend,
        config_path=config_path,
        config=runtime.config.model_dump(mode="json"),
        clock=clock,
    )


def attach(
    runtime: Runtime,
    path: str | Path,
    *,
    backend: str = "sim",
    config_path: str | None = None,
    clock: str = "monotonic",
) -> Recorder:
    """Start recording ``runtime``, streaming to ``path.partial``.

    Call ``recorder.save()`` after the runtime stopped to write ``path``.
    """
    header = run_header(runtime, backend=backend, config_path=config_path, clock=clock)
    recorder = Recorder(runtime, header, stream=RecordingStream(Path(path)))
    recorder.path = Path(path)
    return recorder.start()
