"""The scripted hand: moves torque-off virtual servos the way a person moves an arm.

A person calibrating an arm or driving a leader arm turns joints whose servos have
torque off. ``Hand`` does that to a :class:`~hilbot.sim.virtual_bus.VirtualBus`: it
sets the shaft of every torque-off servo it holds to where a motion says its joint is,
so the present position changes on the wire exactly as a hand would change it. A servo
with torque on holds against the hand (the hand lets go of it until it is off again),
unless its torque is capped to a light hold (``LIGHT_HOLD``), which a finger overcomes.

Motions are joint positions as functions of time, started from where the arm is::

    with running_virtual_bus(specs) as bus, Hand(bus, specs) as hand:
        hand.play(sweep(ranges)).wait()            # each joint through its range
        hand.play(wave(center, ranges))            # until replaced or stopped

``specs`` are the servos as really mounted (see :func:`hilbot.sim.mounting.mounted`):
the hand moves the true joint, whatever the driver's config believes.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from hilbot.hal.mapping import ServoSpec
from hilbot.sim.mounting import mounted, parse_mounting
from hilbot.sim.pty_server import BackgroundService
from hilbot.sim.servo_model import ServoModel

Pose = Mapping[str, float]
#: Ticks of the hand per second: a person's motion is far slower than this.
HAND_RATE_HZ = 100.0
#: A servo with torque on whose torque is capped to this share of its stall torque (a
#: light hold, e.g. a leader's gripper trigger in current-based position control) is
#: moved by the hand anyway, as a finger pushes a trigger.
LIGHT_HOLD = 0.15
#: Names of the motions ``motion_named`` builds (the ``--hand`` option).
MOTIONS = ("sweep", "wave", "still")


class _Servo(Protocol):
    @property
    def index(self) -> int: ...


class HandBus(Protocol):
    """What the hand needs of a virtual bus (Dynamixel or Feetech): its model and lock."""

    model: ServoModel

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """Held while the bus's thread touches the model."""
        ...

    def servo(self, servo_id: int) -> _Servo:
        """The virtual servo answering at ``servo_id``."""
        ...


class Motion(Protocol):
    """Joint positions [rad or m] over time; ``duration`` [s] is ``inf`` for endless ones."""

    @property
    def duration(self) -> float:
        """How long the motion lasts [s]."""
        ...

    def at(self, t: float, start: Pose) -> dict[str, float]:
        """Joint positions ``t`` seconds in, for an arm that was at ``start`` at 0."""
        ...


def _smooth(x: float) -> float:
    """Smoothstep on [0, 1]: a hand starts and stops gently."""
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


@dataclass(frozen=True, slots=True)
class Keyframes:
    """Move through poses: ``frames`` are ``(seconds from the previous frame, pose)``.

    Joints a frame does not name stay where the previous frame left them.
    """

    frames: tuple[tuple[float, Pose], ...]

    def __post_init__(self) -> None:
        for seconds, pose in self.frames:
            if not (math.isfinite(seconds) and seconds >= 0.0):
                raise ValueError(f"keyframe times must be finite and >= 0, got {seconds!r}")
            if not all(math.isfinite(v) for v in pose.values()):
                raise ValueError(f"keyframe poses must be finite, got {dict(pose)!r}")

    @property
    def duration(self) -> float:
        """Sum of the frame times [s]."""
        return sum(seconds for seconds, _ in self.frames)

    def at(self, t: float, start: Pose) -> dict[str, float]:
        """Smooth interpolation between consecutive frames."""
        previous = dict(start)
        elapsed = 0.0
        for seconds, pose in self.frames:
            target = {**previous, **pose}
            if t < elapsed + seconds:
                s = _smooth((t - elapsed) / seconds)
                return {j: previous[j] + s * (target[j] - previous[j]) for j in target}
            previous, elapsed = target, elapsed + seconds
        return previous


@dataclass(frozen=True, slots=True)
class Function:
    """A custom motion: ``fn(t)`` gives joint positions, blended in from the start pose.

    Args:
        fn: seconds -> ``{joint: position}``.
        duration: [s]; ``inf`` runs until replaced.
        blend: [s] over which the arm moves from where it was onto ``fn``'s path.
    """

    fn: Callable[[float], Pose]
    duration: float = math.inf
    blend: float = 1.0

    def at(self, t: float, start: Pose) -> dict[str, float]:
        """``fn(t)``, blended from ``start`` over the first ``blend`` seconds."""
        path = dict(self.fn(t))
        s = _smooth(t / self.blend) if self.blend > 0 else 1.0
        return {j: start.get(j, v) + s * (v - start.get(j, v)) for j, v in path.items()}


def move_to(pose: Pose, seconds: float = 1.0) -> Keyframes:
    """Move smoothly to ``pose`` in ``seconds``."""
    return Keyframes(((seconds, dict(pose)),))


def sweep(
    ranges: Mapping[str, tuple[float, float]],
    center: Pose | None = None,
    *,
    seconds: float = 1.5,
    joints: Sequence[str] | None = None,
    hold: float | None = None,
) -> Keyframes:
    """Each joint in turn from its center to its lower end, its upper end and back.

    Args:
        ranges: ``{joint: (lower, upper)}`` the hand moves within.
        center: where each joint rests; default the middle of its range.
        seconds: per leg of each joint's sweep.
        joints: which joints, in this order (default: those of ``ranges``).
        hold: how long the hand stays at each end [s]; default half of ``seconds``.
    """
    hold = 0.5 * seconds if hold is None else hold
    middle = {j: 0.5 * (lo + hi) for j, (lo, hi) in ranges.items()}
    if center is not None:
        middle.update({j: v for j, v in center.items() if j in ranges})
    frames: list[tuple[float, Pose]] = [(seconds, middle)]
    for joint in joints if joints is not None else list(ranges):
        lo, hi = ranges[joint]
        frames += [
            (seconds, {joint: lo}),
            (hold, {joint: lo}),  # a hand pushes against the end stop for a moment
            (2 * seconds, {joint: hi}),
            (hold, {joint: hi}),
            (seconds, {joint: middle[joint]}),
        ]
    return Keyframes(tuple(frames))


def wave(
    center: Pose,
    ranges: Mapping[str, tuple[float, float]],
    *,
    period: float = 4.0,
    amplitude: float = 0.3,
    duration: float = math.inf,
) -> Function:
    """Every joint swinging about ``center``, each with its own phase (a friendly wave).

    Args:
        center: the pose waved about (kept inside ``ranges``).
        ranges: ``{joint: (lower, upper)}``; the swing is ``amplitude`` of each range.
        period: [s] of one swing.
        amplitude: fraction of each joint's range swept either side of the center.
        duration: [s]; ``inf`` waves until replaced.
    """
    if not (period > 0 and math.isfinite(period)):
        raise ValueError(f"period must be positive and finite, got {period!r}")
    joints = [j for j in ranges if j in center]
    spans = {j: 0.5 * (ranges[j][1] - ranges[j][0]) * amplitude for j in joints}

    def pose(t: float) -> dict[str, float]:
        out = {}
        for k, j in enumerate(joints):
            lo, hi = ranges[j]
            value = center[j] + spans[j] * math.sin(2 * math.pi * t / period + k * 0.9)
            out[j] = min(max(value, lo), hi)
        return out

    return Function(pose, duration)


def still() -> Keyframes:
    """Hold the arm where it is (a hand resting on it)."""
    return Keyframes(())


def motion_named(name: str, ranges: Mapping[str, tuple[float, float]], center: Pose) -> Motion:
    """The motion ``--hand NAME`` names: ``sweep`` (then still), ``wave`` or ``still``.

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    if name == "sweep":
        return sweep(ranges, center)
    if name == "wave":
        return wave(center, ranges)
    if name == "still":
        return still()
    raise ValueError(f"unknown hand motion {name!r}; expected one of {', '.join(MOTIONS)}")


class Hand(BackgroundService):
    """A hand on a virtual bus's torque-off servos, following one motion at a time.

    Args:
        bus: the (running) virtual bus.
        servos: the servos as really mounted; a joint moves its servo and shadows.
        clock: time source [s].
        rate_hz: how often the hand moves the shafts.
    """

    def __init__(
        self,
        bus: HandBus,
        servos: Sequence[ServoSpec],
        *,
        clock: Callable[[], float] = time.monotonic,
        rate_hz: float = HAND_RATE_HZ,
    ) -> None:
        if not (rate_hz > 0 and math.isfinite(rate_hz)):
            raise ValueError(f"rate_hz must be positive and finite, got {rate_hz!r}")
        self.bus = bus
        self._clock = clock
        self._period = 1.0 / rate_hz
        self._servos: dict[str, list[tuple[int, ServoSpec]]] = {}
        for spec in servos:
            self._servos.setdefault(spec.joint, []).append((bus.servo(spec.id).index, spec))
        self._primary = {j: items[0] for j, items in self._servos.items()}
        self._lock = threading.Lock()
        self._motion: Motion = still()
        self._start: dict[str, float] = {}
        self._began = 0.0
        self._done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def joints(self) -> tuple[str, ...]:
        """The joints the hand can move."""
        return tuple(self._servos)

    def joint_positions(self) -> dict[str, float]:
        """Where each joint really is now [rad or m] (from the shaft, true mounting)."""
        model = self.bus.model
        with self.bus.lock:
            return {
                j: spec.offset + spec.direction * float(model.position[i]) / spec.gear_ratio
                for j, (i, spec) in self._primary.items()
            }

    def place(self, pose: Pose) -> None:
        """Put joints at ``pose`` at once (torque-off servos only)."""
        unknown = sorted(set(pose) - set(self._servos))
        if unknown:
            raise KeyError(f"the hand holds no joint {unknown}; it holds {', '.join(self._servos)}")
        model = self.bus.model
        with self.bus.lock:
            for joint, value in pose.items():
                for i, spec in self._servos[joint]:
                    if model.torque_enabled[i] and not self._light(i):
                        continue
                    shaft = spec.direction * (float(value) - spec.offset) * spec.gear_ratio
                    model.position[i] = min(
                        max(shaft, float(model.min_position[i])), float(model.max_position[i])
                    )
                    model.velocity[i] = 0.0
            model.invalidate()

    def _light(self, index: int) -> bool:
        """A torque-on servo a finger overcomes: its torque capped to a light hold."""
        model = self.bus.model
        stall = model.physics[index].stall_torque
        return float(model.torque_limit[index]) <= LIGHT_HOLD * stall

    def play(self, motion: Motion) -> threading.Event:
        """Start ``motion`` from where the arm is now; the event is set when it ends."""
        start = self.joint_positions()
        with self._lock:
            self._motion, self._start, self._began = motion, start, self._clock()
            self._done = threading.Event()
            done = self._done
        if motion.duration <= 0:
            done.set()
        return done

    def perform(self, motion: Motion, timeout: float | None = None) -> bool:
        """Play ``motion`` and wait for its end; ``False`` if ``timeout`` came first."""
        return self.play(motion).wait(timeout)

    # ------------------------------------------------------------------ thread

    def start(self) -> None:
        """Start moving (a thread ticking at ``rate_hz``)."""
        if self._thread is not None:
            raise RuntimeError("the hand is already moving")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="virtual-hand", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Let go of the arm; safe to call twice."""
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout=5.0)

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            self._tick()

    def _tick(self) -> None:
        with self._lock:
            motion, start, began, done = self._motion, self._start, self._began, self._done
        t = self._clock() - began
        pose = motion.at(min(t, motion.duration), start)
        self.place({j: v for j, v in pose.items() if j in self._servos})
        if t >= motion.duration:
            done.set()


# ------------------------------------------------------------------ hand_runner
# Glue for ``hilbot sim-bus --hand/--mount``: mounted servos and a running hand.
def mounted_servos(servos: Sequence[ServoSpec], mounts: Sequence[str]) -> tuple[ServoSpec, ...]:
    """``servos`` with the ``--mount ID:DEG[:reversed]`` errors of those on this bus.

    Raises:
        ValueError: a malformed ``--mount`` (one naming a servo of another bus is skipped;
            ``hilbot sim-bus`` refuses one that names no served servo).
    """
    parsed = dict(parse_mounting(text) for text in mounts)
    ids = {s.id for s in servos}
    return mounted(servos, {i: m for i, m in parsed.items() if i in ids})


def check_mount_ids(mounts: Sequence[str], ids: Sequence[int], where: str = "the bus") -> None:
    """Refuse a ``--mount`` naming a servo that is not among ``ids`` (those on ``where``).

    Raises:
        ValueError: a malformed ``--mount``, or one naming no servo of ``ids``.
    """
    for text in mounts:
        servo, _ = parse_mounting(text)
        if servo not in ids:
            known = ", ".join(str(i) for i in sorted(ids))
            raise ValueError(f"--mount {text!r}: no servo {servo} on {where} (ids {known})")


@contextlib.contextmanager
def hand_on(
    bus: HandBus,
    servos: Sequence[ServoSpec],
    motion: str,
    ranges: Mapping[str, tuple[float, float]],
    center: Pose,
    *,
    begin: threading.Event | None = None,
    delay: float = 0.0,
) -> Iterator[Hand]:
    """A hand playing the named motion on ``bus`` until the context ends.

    ``sweep`` sweeps once and then holds; ``wave`` waves about ``center`` (clipped to the
    ranges) until the end. The motion starts ``delay`` seconds after ``begin`` is set (a
    virtual bus's ``first_packet``: when a client first talks on the port), or after
    ``delay`` seconds from now without ``begin``.
    """
    joints = {s.joint for s in servos}
    ranges = {j: r for j, r in ranges.items() if j in joints}
    middle = {j: min(max(center.get(j, 0.5 * (lo + hi)), lo), hi) for j, (lo, hi) in ranges.items()}
    chosen = motion_named(motion, ranges, middle)
    with Hand(bus, servos) as hand:
        if begin is None and delay <= 0:
            hand.play(chosen)
            yield hand
            return
        ended = threading.Event()

        def later() -> None:
            if begin is not None:
                while not begin.wait(0.1):
                    if ended.is_set():
                        return
            if not ended.wait(delay):
                hand.play(chosen)

        waiter = threading.Thread(target=later, name="virtual-hand-start", daemon=True)
        waiter.start()
        try:
            yield hand
        finally:
            ended.set()
            waiter.join(timeout=5.0)
