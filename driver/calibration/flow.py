"""The measurement behind ``hilbot calibrate``: ids, middle pose, ranges, directions.

The flow talks to the arm through a :class:`~hilbot.hal.calibration.ServoAccess` (any
servo family) and to the person through a :class:`Guide` (terminal prompts, or the
scripted hand of the virtual bus in ``--demo``). Steps:

1. every configured id answers, with the configured model;
2. the arm in the documented middle pose: its ticks set the offsets;
3. each joint moved through its full range: live min/max per joint;
4. each joint moved the positive way (the URDF's axis): the sign of the change is its
   direction.

The result is a :class:`~hilbot.hal.calibration.Calibration`; ``write_servos`` also
puts Homing Offset and the position limits in the servos' EEPROM.
"""

from __future__ import annotations

import asyncio
import datetime
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.errors import DriverError
from hilbot.hal.calibration import Calibration, Geometry, JointCalibration, ServoAccess
from hilbot.hal.errors import CommError
from hilbot.hal.mapping import ServoSpec

T = TypeVar("T")

#: A move the direction check counts as deliberate [rad of shaft].
DIRECTION_THRESHOLD = 0.15
#: How long the direction check waits for a joint to move [s].
DIRECTION_TIMEOUT = 60.0
#: Between two readings while watching the arm [s].
SAMPLE_PERIOD = 0.02
#: Readings tried before a lost reply ends the calibration (a busy host loses some).
READ_ATTEMPTS = 5
#: Times the demo's hand sweeps again the joints whose ends step 2 did not see.
RESWEEPS = 2


class CalibrationError(DriverError):
    """The calibration cannot go on: a missing or wrong servo, a joint that did not move."""


class Guide(Protocol):
    """Who moves the arm: a person at a terminal, or the scripted hand."""

    async def middle_pose(self, text: str, pose: Mapping[str, float]) -> None:
        """Return once the arm is in the middle pose."""
        ...

    async def full_range(self, joints: Sequence[str]) -> None:
        """Return once every joint has been moved through its full range."""
        ...

    async def positive(self, joint: str) -> None:
        """Ask for ``joint`` to be moved the positive way (returns at once)."""
        ...

    async def confirm(self, question: str) -> bool:
        """Ask a yes/no question."""
        ...

    def say(self, text: str) -> None:
        """Tell the person something (one or more lines)."""
        ...

    def status(self, line: str) -> None:
        """Redraw the live status line."""
        ...


@dataclass(frozen=True, slots=True)
class _Joint:
    spec: ServoSpec
    geometry: Geometry

    def shaft(self, ticks: int) -> float:
        """[rad] of the servo's shaft from its center tick."""
        return (ticks - self.geometry.center) * self.geometry.radians_per_tick


@dataclass(slots=True)
class Measurement:
    """What the flow saw, in ticks: middle pose, extremes, directions."""

    middle: dict[int, int]
    low: dict[int, int]
    high: dict[int, int]
    direction: dict[int, int]


def plan(config: RobotConfig) -> tuple[ServoSpec, ...]:
    """The servos to calibrate (one per joint).

    Raises:
        CalibrationError: a robot with shadow servos, or a middle pose naming unknown joints.
    """
    specs = config.servo_specs()
    shadows = [s.id for s in specs if s.shadow_of is not None]
    if shadows:
        raise CalibrationError(
            f"servos {shadows} are shadows of another servo: calibrating robots with shadow "
            "servos is not supported yet; keep their offsets in the config"
        )
    unknown = sorted(set(config.calibration.middle_pose) - set(config.joint_names))
    if unknown:
        raise CalibrationError(f"calibration.middle_pose names unknown joints: {unknown}")
    return specs


async def _whole(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` in a thread; a cancelled wait still waits for the call to end.

    Every bus call of the flow goes through here.

    Cancelling an ``asyncio.to_thread`` wait does not stop its thread: a bus read would
    go on while the next step's read starts in another thread, two threads on one port
    (one of them then finds the port readable and empty, and reports it closed), and a
    Ctrl-C would close the port under an EEPROM write still running.
    """
    job = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        await asyncio.gather(job, return_exceptions=True)  # the bus is free again
        raise


async def check_servos(access: ServoAccess, specs: Sequence[ServoSpec]) -> list[Geometry]:
    """Step 1: each id answers with its configured model; their encoder geometry.

    Raises:
        CalibrationError: listing every missing or different servo.
    """
    problems = []
    for spec in specs:
        found = await _whole(access.model_of, spec.id)
        if found is None:
            problems.append(f"servo {spec.id} ({spec.joint}) does not answer")
        elif spec.model.upper() not in found.upper().split("/"):  # "A/B": one number, two
            problems.append(f"servo {spec.id} ({spec.joint}) is a {found}, not a {spec.model}")
    if problems:
        raise CalibrationError(
            "; ".join(problems) + " (hilbot scan lists what is on the bus; hilbot servo sets ids)"
        )
    return [await _whole(access.geometry, s.id) for s in specs]


async def _ticks(access: ServoAccess, ids: Sequence[int]) -> dict[int, int]:
    """One reading of ``ids``; a lost reply is asked again, up to ``READ_ATTEMPTS`` times."""
    for attempt in range(READ_ATTEMPTS):
        try:
            return await _whole(access.present_ticks, ids)
        except CommError:
            if attempt == READ_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


async def _watch_ranges(
    access: ServoAccess,
    joints: Sequence[_Joint],
    low: dict[int, int],
    high: dict[int, int],
    show: Callable[[str], None],
) -> None:
    ids = [j.spec.id for j in joints]
    while True:
        for i, t in (await _ticks(access, ids)).items():
            low[i], high[i] = min(low[i], t), max(high[i], t)
        show(
            "  ".join(
                f"{j.spec.joint} {math.degrees(j.shaft(low[j.spec.id])):+5.0f}.."
                f"{math.degrees(j.shaft(high[j.spec.id])):+4.0f}°"
                for j in joints
            )
        )
        await asyncio.sleep(SAMPLE_PERIOD)


async def _direction(
    access: ServoAccess, joint: _Joint, guide: Guide, timeout: float
) -> tuple[int, int, int]:
    """Step 4 for one joint: +1 or -1, and the lowest and highest ticks seen meanwhile."""
    i = joint.spec.id
    start = (await _ticks(access, [i]))[i]
    low = high = start
    await guide.positive(joint.spec.joint)
    threshold = DIRECTION_THRESHOLD / joint.geometry.radians_per_tick
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        t = (await _ticks(access, [i]))[i]
        low, high = min(low, t), max(high, t)
        if abs(t - start) >= threshold:
            return (1 if t > start else -1), low, high
        await asyncio.sleep(SAMPLE_PERIOD)
    raise CalibrationError(
        f"{joint.spec.joint} (servo {i}) did not move within {timeout:g} s; is it stuck, or "
        "its torque on?"
    )


async def measure(
    config: RobotConfig,
    access: ServoAccess,
    guide: Guide,
    *,
    direction_timeout: float = DIRECTION_TIMEOUT,
    swept: Mapping[str, tuple[float, float]] | None = None,
) -> tuple[tuple[_Joint, ...], Measurement]:
    """Steps 1-4: the ticks at the middle pose, at each joint's extremes, and directions.

    ``swept`` is where the demo's hand takes each joint in step 2 (``{joint: (lower,
    upper)}``): a joint not seen at both ends is swept again (the guide's ``sweep``).
    """
    specs = plan(config)
    geometries = await check_servos(access, specs)
    joints = tuple(_Joint(s, g) for s, g in zip(specs, geometries, strict=True))
    ids = [s.id for s in specs]
    guide.say(f"All {len(ids)} servos answer with the configured models; torque goes off.")
    for i in ids:
        await _whole(access.set_torque, i, False)
    pose = {j: config.calibration.middle_pose.get(j, 0.0) for j in config.joint_names}
    await guide.middle_pose(config.calibration.middle_pose_text, pose)
    middle = await _ticks(access, ids)
    low, high = dict(middle), dict(middle)
    await _watched(access, joints, low, high, guide, guide.full_range([s.joint for s in specs]))
    direction = {}
    for joint in joints:
        sign, lo, hi = await _direction(access, joint, guide, direction_timeout)
        i = joint.spec.id
        direction[i], low[i], high[i] = sign, min(low[i], lo), max(high[i], hi)
    seen = Measurement(middle, low, high, direction)
    if swept is not None:
        await _sweep_again(config, access, joints, seen, guide, swept)
    return joints, seen


async def _watched(
    access: ServoAccess,
    joints: Sequence[_Joint],
    low: dict[int, int],
    high: dict[int, int],
    guide: Guide,
    moves: Awaitable[None],
) -> None:
    """Await ``moves`` while the live line shows (and ``low``/``high`` keep) each extreme."""
    watcher = asyncio.create_task(_watch_ranges(access, joints, low, high, guide.status))
    try:
        await moves
    finally:
        if watcher.done():
            watcher.result()  # the bus failed while watching: say so, never a short range
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


def _unseen(
    config: RobotConfig,
    joints: Sequence[_Joint],
    seen: Measurement,
    swept: Mapping[str, tuple[float, float]],
) -> list[str]:
    """The joints whose measured range misses an end of the hand's sweep."""
    from hilbot.driver.calibration.checks import SWEEP_SLACK

    out = []
    for joint in joints:
        i, name = joint.spec.id, joint.spec.joint
        if name not in swept:
            continue
        mid = config.calibration.middle_pose.get(name, 0.0)
        d = seen.direction[i] / joint.spec.gear_ratio
        ends = [
            mid + d * (joint.shaft(t) - joint.shaft(seen.middle[i]))
            for t in (seen.low[i], seen.high[i])
        ]
        lo, hi = swept[name]
        if min(ends) > lo + SWEEP_SLACK or max(ends) < hi - SWEEP_SLACK:
            out.append(name)
    return out


async def _sweep_again(
    config: RobotConfig,
    access: ServoAccess,
    joints: Sequence[_Joint],
    seen: Measurement,
    guide: Guide,
    swept: Mapping[str, tuple[float, float]],
) -> None:
    """``--demo``: the joints the readings did not see at both ends are swept again.

    A busy host can miss the moment the hand holds a joint at its end; a person would
    look at the live line and move that joint again. What is still missed after
    ``RESWEEPS`` tries is left for the range check to refuse.
    """
    sweep: Callable[[Sequence[str]], Awaitable[None]] | None = getattr(guide, "sweep", None)
    for _ in range(RESWEEPS):
        unseen = _unseen(config, joints, seen, swept)
        if not unseen or sweep is None:
            return
        guide.say(f"  [demo] not seen at both ends: {', '.join(unseen)}; the hand sweeps again")
        await _watched(access, joints, seen.low, seen.high, guide, sweep(unseen))


def result(
    config: RobotConfig,
    joints: Sequence[_Joint],
    seen: Measurement,
    port: str,
    homing: Mapping[int, int] | None = None,
) -> Calibration:
    """The calibration of what was measured (``homing``: the offsets written, if any).

    Where a Homing Offset was written the middle pose reads the center tick, so the
    ticks are shifted by what it changed.
    """
    out = {}
    for joint in joints:
        spec, i = joint.spec, joint.spec.id
        shift = 0 if homing is None else joint.geometry.center - seen.middle[i]
        d = seen.direction[i]
        mid = config.calibration.middle_pose.get(spec.joint, 0.0)
        offset = mid - d * joint.shaft(seen.middle[i] + shift) / spec.gear_ratio
        ends = [
            offset + d * joint.shaft(t + shift) / spec.gear_ratio
            for t in (seen.low[i], seen.high[i])
        ]
        out[spec.joint] = JointCalibration(
            servo_id=i,
            offset=offset,
            direction=d,
            lower=min(ends),
            upper=max(ends),
            homing_offset=None if homing is None else homing[i],
        )
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return Calibration(config.name, port, out, created)


async def write_servos(
    access: ServoAccess, joints: Sequence[_Joint], seen: Measurement
) -> dict[int, int]:
    """Homing Offset (the middle pose reads the center tick) and limits (the range seen).

    Returns the Homing Offset written to each servo.
    """
    written = {}
    for joint in joints:
        i, g = joint.spec.id, joint.geometry
        old = await _whole(access.homing_offset, i)
        shift = g.center - seen.middle[i]
        homing = old + access.homing_sign * shift
        lower = min(max(seen.low[i] + shift, g.min_tick), g.max_tick)
        upper = min(max(seen.high[i] + shift, g.min_tick), g.max_tick)
        await _whole(access.write_calibration, i, homing, lower, upper)
        written[i] = homing
    return written


def summary(calibration: Calibration, config: RobotConfig) -> str:
    """A table of the result, one joint a line, with the config's direction beside it."""
    configured = {s.joint: s for s in config.servo_specs()}
    lines = [f"{'joint':14s} {'servo':>5s} {'offset':>9s} {'dir':>4s}  range"]
    for name, j in calibration.joints.items():
        flipped = "  (reversed vs config)" if j.direction != configured[name].direction else ""
        lines.append(
            f"{name:14s} {j.servo_id:5d} {math.degrees(j.offset):+8.1f}° {j.direction:+4d}  "
            f"{math.degrees(j.lower):+7.1f}° .. {math.degrees(j.upper):+7.1f}°{flipped}"
        )
    return "\n".join(lines)
