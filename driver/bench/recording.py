"""The recording file: every control cycle as numpy channels plus a JSON header.

A recording is one compressed ``.npz`` (``numpy.savez_compressed``), readable
without pickle: the array ``header`` holds a JSON document (format version,
hilbot/numpy/python versions, the robot config, the scenario, backend, joint
and chain names), every other array is a channel with one row per cycle
(``N`` cycles, ``J`` joints, ``C`` chains):

======================  ============  ==========================================
channel                 shape         meaning
======================  ============  ==========================================
``cycle``               (N,)          cycle index since the runtime started
``t``                   (N,)          scheduled cycle time [s] since the first cycle
``lateness``            (N,)          how late the cycle started [s]
``cycle_time``          (N,)          time the cycle's work took [s]
``ik_time``             (N,)          time spent in IK [s]
``mode``                (N,)          index into ``header["modes"]``
``q_measured``          (N, J)        joint positions read this cycle [rad or m]
``qd_measured``         (N, J)        joint velocities read [rad/s or m/s]
``effort``              (N, J)        present current [A] or load [%] read (NaN: none;
                                      recordings made before it load as all NaN)
``q_target``            (N, J)        what targets and IK asked for, before safety (armed)
``q_joint_target``      (N, J)        joint-space targets received (NaN: none for that joint)
``q_ik``                (N, J)        IK result before safety (NaN: no IK ran)
``q_command``           (N, J)        goal positions written (NaN: nothing written)
``clamped``             (N, J)        clamp kinds applied, bit flags of ``ClampKind``
``hw_errors``           (N, J)        hardware-error flags read (``HardwareErrorFlags``)
``ee_target``           (N, C, 3)     end-effector position target [m] (NaN: none)
``ee_measured``         (N, C, 3)     forward kinematics of ``q_measured`` [m]
``ik_residual``         (N, C)        IK position residual [m] (NaN: no IK)
``bus_errors``          (N,)          cycles whose bus read or write failed, so far
``ee_target_kind``      (N, C)        how the pose target was given (``OrientationKind``)
``ee_target_orientation`` (N, C, 9)   its orientation values (axis, quaternion or matrix)
``target_new``          (N, C + 1)    a new target arrived for the chain (last: joints)
``clamp_events``        (K, 5)        cycle, joint index, ClampKind, before, after
======================  ============  ==========================================
"""

from __future__ import annotations

import enum
import io
import json
import logging
import platform
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot import __version__
from hilbot.driver.bench.errors import RecordingError
from hilbot.driver.files import write_atomic

log = logging.getLogger(__name__)

FORMAT = "hilbot-recording"
FORMAT_VERSION = 1


class ClampKind(enum.IntFlag):
    """Why the safety layer changed a joint's command (bit flags, several per cycle)."""

    NONE = 0
    LIMIT = 1  # outside the joint limits (URDF ∩ soft limits)
    DELTA = 2  # more than the per-cycle max delta
    VELOCITY = 4  # faster than the velocity limit
    NONFINITE = 8  # NaN or inf rejected

    @classmethod
    def parse(cls, name: str) -> ClampKind:
        """Map a clamp-kind name from the runtime (``"limit"``, ``"max_delta"``, ...) to a flag."""
        key = name.lower()
        for alias, kind in _CLAMP_ALIASES.items():
            if alias in key:
                return kind
        return cls.LIMIT


_CLAMP_ALIASES = {
    "delta": ClampKind.DELTA,
    "vel": ClampKind.VELOCITY,
    "nan": ClampKind.NONFINITE,
    "finite": ClampKind.NONFINITE,
    "limit": ClampKind.LIMIT,
}

#: channel -> (dtype, trailing shape kind): "" per cycle, "J" per joint, "C" per chain,
#: "C3" per chain xyz; events have their own row count.
CHANNELS: dict[str, tuple[type[np.generic], str]] = {
    "cycle": (np.int64, ""),
    "t": (np.float64, ""),
    "lateness": (np.float64, ""),
    "cycle_time": (np.float64, ""),
    "ik_time": (np.float64, ""),
    "mode": (np.int8, ""),
    "q_measured": (np.float64, "J"),
    "qd_measured": (np.float64, "J"),
    "effort": (np.float64, "J"),
    "q_target": (np.float64, "J"),
    "q_joint_target": (np.float64, "J"),
    "q_ik": (np.float64, "J"),
    "q_command": (np.float64, "J"),
    "clamped": (np.uint8, "J"),
    "hw_errors": (np.uint8, "J"),
    "ee_target": (np.float64, "C3"),
    "ee_measured": (np.float64, "C3"),
    "ik_residual": (np.float64, "C"),
    "bus_errors": (np.int64, ""),
    "ee_target_kind": (np.int8, "C"),
    "ee_target_orientation": (np.float64, "C9"),
    "target_new": (np.bool_, "S"),
}
CLAMP_EVENT_COLUMNS = ("cycle", "joint", "kind", "before", "after")
#: Channels that are NaN (no value) rather than zero when a cycle has nothing to record.
NAN_FILLED = frozenset(
    {
        "q_target",
        "q_joint_target",
        "q_ik",
        "q_command",
        "ee_target",
        "ee_measured",
        "ik_residual",
        "ee_target_orientation",
        "effort",
    }
)


def channel_shape(kind: str, n: int, joints: int, chains: int) -> tuple[int, ...]:
    """Return the array shape of a channel of shape kind ``kind`` for ``n`` cycles."""
    return {
        "": (n,),
        "J": (n, joints),
        "C": (n, chains),
        "C3": (n, chains, 3),
        "C9": (n, chains, 9),
        "S": (n, chains + 1),
    }[kind]


@dataclass
class RecordingHeader:
    """What a recording was made of: enough to run it again.

    Attributes:
        joint_names: the ``J`` joints, in channel column order.
        chain_names: the ``C`` chains, in channel order.
        rate_hz: the loop rate [Hz].
        modes: runtime mode names; the ``mode`` channel indexes this list.
        backend: ``"sim"``, ``"mujoco"``, ``"virtual"`` or ``"hardware"`` (``"dynamixel"`` in
            recordings made before the rename).
        config_path: the robot config file (as given), for replay.
        config: the robot config as a JSON-able mapping.
        scenario: the scenario as a mapping, or ``None`` (``hilbot run --record``).
        clock: ``"fake"`` (deterministic) or ``"monotonic"``.
        faults: fault injections, ``{"cycle", "action", "joint", ...}``.
        commands: lifecycle commands sent, ``{"cycle", "command"}`` (run before that cycle).
        initial_positions: joint positions when the run started (the simulator's start).
        sim: simulator settings of the run (``SimBackend`` keyword arguments).
        versions: hilbot, numpy and python versions that wrote the file.
    """

    joint_names: tuple[str, ...]
    chain_names: tuple[str, ...]
    rate_hz: float
    modes: tuple[str, ...] = ("disarmed", "armed", "estopped", "faulted")
    backend: str = "sim"
    config_path: str | None = None
    config: dict[str, Any] | None = None
    scenario: dict[str, Any] | None = None
    clock: str = "monotonic"
    faults: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    initial_positions: dict[str, float] = field(default_factory=dict)
    sim: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        """Serialise to the JSON document stored in the file."""
        doc = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "joint_names": list(self.joint_names),
            "chain_names": list(self.chain_names),
            "rate_hz": self.rate_hz,
            "modes": list(self.modes),
            "backend": self.backend,
            "config_path": self.config_path,
            "config": self.config,
            "scenario": self.scenario,
            "clock": self.clock,
            "faults": self.faults,
            "commands": self.commands,
            "initial_positions": self.initial_positions,
            "sim": self.sim,
            "versions": self.versions or current_versions(),
        }
        return json.dumps(doc, default=_json_default)

    @classmethod
    def from_json(cls, text: str, path: Path) -> RecordingHeader:
        """Parse the header document; raises ``RecordingError`` naming what is wrong."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordingError(path, f"the header is not JSON: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise RecordingError(path, f"not a {FORMAT} file (header 'format' missing)")
        if doc.get("format_version") != FORMAT_VERSION:
            raise RecordingError(
                path,
                f"format version {doc.get('format_version')!r} is not supported "
                f"(this hilbot reads version {FORMAT_VERSION})",
            )
        try:
            return cls(
                joint_names=tuple(doc["joint_names"]),
                chain_names=tuple(doc["chain_names"]),
                rate_hz=float(doc["rate_hz"]),
                modes=tuple(doc["modes"]),
                backend=str(doc["backend"]),
                config_path=doc.get("config_path"),
                config=doc.get("config"),
                scenario=doc.get("scenario"),
                clock=str(doc.get("clock", "monotonic")),
                faults=list(doc.get("faults", [])),
                commands=list(doc.get("commands", [])),
                initial_positions=dict(doc.get("initial_positions", {})),
                sim=dict(doc.get("sim", {})),
                versions=dict(doc.get("versions", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordingError(path, f"header field missing or malformed: {exc}") from exc


def current_versions() -> dict[str, str]:
    """Return the versions that matter for reproducing a run."""
    return {"hilbot": __version__, "numpy": np.__version__, "python": platform.python_version()}


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return value.as_posix()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"cannot store {type(value).__name__} in a recording header")


@dataclass
class Recording:
    """A finished recording: the header and its channels (see the module docstring).

    ``cut_short`` is true for a recording read from its ``.partial`` folder: the run that
    wrote it did not end cleanly (see :mod:`hilbot.driver.bench.stream`).
    """

    header: RecordingHeader
    channels: dict[str, NDArray[Any]]
    cut_short: bool = False

    def __post_init__(self) -> None:
        self._validate(Path("<memory>"))

    @property
    def n_cycles(self) -> int:
        """Number of recorded cycles."""
        return int(self.channels["t"].shape[0])

    def __getitem__(self, name: str) -> NDArray[Any]:
        return self.channels[name]

    @property
    def clamp_events(self) -> NDArray[np.float64]:
        """Clamp events, one row per event: cycle, joint index, kind, before, after."""
        return self.channels.get("clamp_events", np.zeros((0, 5)))

    def save(self, path: str | Path) -> Path:
        """Write the recording as a compressed ``.npz``; returns the path written.

        The file is written under a temporary name and renamed into place: a failed
        write (a full disk) leaves an earlier file at ``path`` as it was.
        """
        path = Path(path)
        # typed Any: numpy's stub types **kwds as if they could be its allow_pickle flag
        arrays: dict[str, Any] = {n: np.ascontiguousarray(a) for n, a in self.channels.items()}
        header = np.array(self.header.to_json())
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, lambda fh: np.savez_compressed(fh, header=header, **arrays))
        except OSError as exc:
            raise RecordingError(path, f"cannot write: {exc.strerror}") from exc
        return path

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        """Read a recording written by ``save``.

        When the run that recorded to ``path`` did not end cleanly, there is no file
        ``path`` but a folder ``path.partial``: that is read instead (or when ``path`` is
        that folder), and the recording's ``cut_short`` is true.

        Raises:
            RecordingError: missing, not a recording, a newer format, or channels
                with the wrong shape.
        """
        path = Path(path)
        from hilbot._bounded import clip
        from hilbot.driver.bench.npz_check import NpzTooLarge, check_npz

        partial = partial_source(path)  # a run that did not end cleanly: its .partial folder
        if partial is not None:
            return load_partial(partial)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise RecordingError(path, f"cannot read: {exc.strerror}") from exc
        if not zipfile.is_zipfile(io.BytesIO(raw)):
            raise RecordingError(path, "not a numpy .npz recording (not a zip archive)")
        try:
            check_npz(io.BytesIO(raw))  # the declared sizes, before numpy allocates them
            with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
        except NpzTooLarge as exc:
            raise RecordingError(path, f"cannot load it: {exc}") from None
        except MemoryError:
            raise RecordingError(path, "cannot load it: not enough memory") from None
        except (ValueError, OSError, zipfile.BadZipFile) as exc:
            raise RecordingError(path, f"not a numpy .npz recording: {clip(str(exc))}") from exc
        if "header" not in arrays:
            raise RecordingError(path, "no 'header' array: not a hilbot recording")
        header = RecordingHeader.from_json(str(arrays.pop("header")), path)
        recording = cls.__new__(cls)
        recording.header = header
        recording.channels = arrays
        recording._validate(path)
        return recording

    def _validate(self, path: Path) -> None:
        if "effort" not in self.channels and "t" in self.channels:  # recorded before it
            n, joints = self.channels["t"].shape[0], len(self.header.joint_names)
            self.channels["effort"] = np.full((n, joints), np.nan)
        missing = sorted(set(CHANNELS) - set(self.channels))
        if missing:
            raise RecordingError(path, f"channels missing: {', '.join(missing)}")
        n = self.channels["t"].shape[0]
        joints, chains = len(self.header.joint_names), len(self.header.chain_names)
        for name, (_, kind) in CHANNELS.items():
            want = channel_shape(kind, n, joints, chains)
            if self.channels[name].shape != want:
                raise RecordingError(
                    path, f"channel {name!r} has shape {self.channels[name].shape}, expected {want}"
                )
        events = self.channels.get("clamp_events")
        if events is not None and (events.ndim != 2 or events.shape[1] != 5):
            raise RecordingError(path, f"clamp_events has shape {events.shape}, expected (K, 5)")


# -- partial recordings (streamed by hilbot.driver.bench.stream, read here) ------------------
PARTIAL_SUFFIX = ".partial"
HEADER_FILE = "header.json"
CHUNK_GLOB = "chunk-*.npz"


def partial_path(path: Path) -> Path:
    """The folder that a recording to ``path`` streams into: ``path`` + ``.partial``."""
    return path.with_name(path.name + PARTIAL_SUFFIX)


def partial_source(path: Path) -> Path | None:
    """The partial folder to read for ``path``, or ``None`` to read ``path`` as a file.

    That is ``path`` itself when it is such a folder, or ``path.partial`` when there is no
    file ``path`` (the run that wrote it did not end cleanly).
    """
    if path.is_dir() and (path.name.endswith(PARTIAL_SUFFIX) or (path / HEADER_FILE).exists()):
        return path
    if not path.exists() and partial_path(path).is_dir():
        return partial_path(path)
    return None


def load_partial(folder: Path) -> Recording:
    """Read a partial recording folder: its header and every complete chunk, in order.

    Raises:
        RecordingError: no header (the run stopped before it recorded anything), or chunks
            that do not fit the header.
    """
    try:
        text = (folder / HEADER_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordingError(
            folder, "a partial recording without its header: the run stopped before it began"
        ) from None
    except OSError as exc:
        raise RecordingError(folder, f"cannot read: {exc.strerror}") from exc
    header = RecordingHeader.from_json(text, folder)
    parts = _chunks(folder)
    joints, chains = len(header.joint_names), len(header.chain_names)
    channels: dict[str, NDArray[Any]] = {}
    try:
        for name, (dtype, kind) in CHANNELS.items():
            empty = np.zeros(channel_shape(kind, 0, joints, chains), dtype=dtype)
            channels[name] = np.concatenate([empty, *(p[name] for p in parts)])
        events = [np.zeros((0, 5)), *(p["clamp_events"] for p in parts)]
        channels["clamp_events"] = np.concatenate(events)
    except (KeyError, ValueError) as exc:
        raise RecordingError(folder, f"a chunk does not fit the header: {exc}") from exc
    try:
        return Recording(header=header, channels=channels, cut_short=True)
    except RecordingError as exc:
        raise RecordingError(folder, exc.reason) from exc


def _chunks(folder: Path) -> list[dict[str, NDArray[Any]]]:
    """The folder's chunks up to the first one missing or unreadable."""
    parts, row = [], 0
    from hilbot.driver.bench.npz_check import check_npz

    for file in sorted(folder.glob(CHUNK_GLOB)):
        try:
            check_npz(file)  # NpzTooLarge is a ValueError: an array it cannot hold
            with np.load(file, allow_pickle=False) as npz:
                data = {name: npz[name] for name in npz.files}
        except (OSError, ValueError, EOFError, MemoryError, zipfile.BadZipFile) as exc:
            log.warning("recording: %s is unreadable (%s); reading the cycles before it", file, exc)
            break
        start = data.pop("row0", None)
        if start is None or int(start) != row or "t" not in data:
            log.warning("recording: %s does not follow the chunk before it; stopping there", file)
            break
        parts.append(data)
        row += len(data["t"])
    return parts
