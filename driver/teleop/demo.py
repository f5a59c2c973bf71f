"""Demo publishers: draw a circle or a figure-eight with a chain, or jog it from the keyboard."""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import time
from collections.abc import Iterator
from typing import TextIO

import numpy as np

from hilbot.driver.teleop.errors import NotConnected
from hilbot.driver.teleop.patterns import (
    JOG_COMMANDS,
    JOG_HELP,
    Pattern,
    Plane,
    jog_step,
    pattern_offset,
)
from hilbot.driver.teleop.publisher import TeleopPublisher

_LOGGER = logging.getLogger(__name__)


async def enable(publisher: TeleopPublisher, timeout: float = 3.0) -> str | None:
    """Send ``enable`` and wait until ``state`` reports the robot armed.

    Returns:
        None once it is armed; else why not: the robot's refusal of this ``enable`` from
        its ``error`` topic (a latched e-stop, a stale calibration, a fault), or the mode
        its ``state`` still reports after ``timeout`` [s].
    """
    seq = await publisher.command("enable")

    def refusal() -> str | None:
        for error in reversed(publisher.errors):
            if error.get("topic") == publisher.topics.cmd and error.get("seq") == seq:
                return str(error.get("detail") or error.get("reason") or "refused")
        return None

    def settled(p: TeleopPublisher) -> bool:
        armed = p.state is not None and p.state.get("mode") == "armed"
        return armed or refusal() is not None

    try:
        await publisher.wait_until(settled, timeout)
    except TimeoutError:
        mode = publisher.state.get("mode") if publisher.state is not None else None
        return f"its state still reports {mode!r} after {timeout:g} s"
    return refusal()


async def play_pattern(
    publisher: TeleopPublisher,
    chain: str,
    pattern: Pattern,
    *,
    radius: float = 0.03,
    period_s: float = 4.0,
    rate_hz: float = 50.0,
    plane: Plane = Plane.YZ,
    duration_s: float | None = None,
    arm: bool = True,
    logger: logging.Logger | None = None,
) -> int:
    """Publish ``pattern`` around the chain's present end-effector position.

    The curve starts at the present position (read from ``state``), so the arm
    does not jump. Targets carry ``stamp`` and ``ttl``; if this publisher stops,
    the runtime's watchdog makes the robot hold.

    Args:
        publisher: a connected publisher for the robot.
        chain: the chain to move.
        pattern: circle or figure-eight.
        radius: size of the pattern [m].
        period_s: time for one loop [s].
        rate_hz: publish rate [Hz].
        plane: the plane of the curve, in the chain's source frame.
        duration_s: stop after this long [s]; None runs until cancelled.
        arm: send ``enable`` first.
        logger: where to log.

    Returns:
        The number of targets published.
    """
    log = logger if logger is not None else _LOGGER
    if period_s <= 0.0 or rate_hz <= 0.0:
        raise ValueError(f"period_s and rate_hz must be > 0, got {period_s} and {rate_hz}")
    start = await publisher.chain_position(chain)
    refused = await enable(publisher) if arm else None
    if refused is not None:
        log.warning("the robot is not armed: %s; publishing anyway", refused)
    log.info(
        "teleop demo: %s of %.3f m on %r around %s", pattern.value, radius, chain, start.round(3)
    )
    sent = 0
    began = time.monotonic()
    for t in _ticks(rate_hz, duration_s):
        await _sleep_until(t)
        phase = 2.0 * math.pi * (t - began) / period_s
        await publisher.target(chain, start + pattern_offset(pattern, phase, radius, plane))
        sent += 1
    return sent


async def _sleep_until(deadline: float) -> None:
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))


def _ticks(rate_hz: float, duration_s: float | None) -> Iterator[float]:
    """Monotonic deadlines at ``rate_hz`` (sync generator; the caller sleeps)."""
    period = 1.0 / rate_hz
    start = time.monotonic()
    k = 0
    while duration_s is None or k * period < duration_s:
        yield start + k * period
        k += 1


async def jog(
    publisher: TeleopPublisher,
    chain: str,
    *,
    step: float = 0.005,
    rate_hz: float = 50.0,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> None:
    """Jog ``chain`` from the keyboard (a TTY); returns on ``q``.

    The target starts at the present position; each key press moves it by
    ``step`` [m]. It is re-published at ``rate_hz`` so the watchdog stays fed
    while a key is held or not.

    The e-stop key (space) works while the broker is lost: it says the e-stop was
    not delivered and keeps sending it until the robot's state reports it
    e-stopped, or the operator quits (which then says it never was).
    """
    try:
        import termios
        import tty
    except ImportError:
        raise RuntimeError(
            f"keyboard jogging needs a POSIX terminal (termios); not available on {sys.platform}"
        ) from None

    stream = stdin if stdin is not None else sys.stdin
    console = out if out is not None else sys.stderr
    if not stream.isatty():
        raise RuntimeError("keyboard jogging needs a terminal (stdin is not a TTY)")
    target = await publisher.chain_position(chain)
    keys: asyncio.Queue[str] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    loop.add_reader(fd, lambda: keys.put_nowait(stream.read(1)))
    print(JOG_HELP, file=console)
    estops: list[asyncio.Task[None]] = []
    try:
        await _jog_loop(publisher, chain, target, keys, step, 1.0 / rate_hz, console, estops)
    finally:
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        for task in estops:
            if not task.done():
                task.cancel()
                print(
                    "\nquitting: the e-stop was NOT delivered (the robot never confirmed it)",
                    file=console,
                    flush=True,
                )


async def _jog_command(
    publisher: TeleopPublisher, name: str, console: TextIO, estops: list[asyncio.Task[None]]
) -> None:
    """Send a jog key's command; an e-stop is sent until the robot confirms it."""
    if name != "estop":
        try:
            await publisher.command(name)
        except NotConnected as exc:
            print(f"\r{name} not sent: {exc}", file=console, flush=True)
        return
    if not any(not task.done() for task in estops):
        estops[:] = [asyncio.get_running_loop().create_task(_estop(publisher, console))]


async def _estop(publisher: TeleopPublisher, console: TextIO) -> None:
    told = False

    def not_yet(why: str) -> None:
        nonlocal told
        if not told:
            print(
                f"\re-stop NOT delivered: {why}; sending it until the robot confirms it (q quits)",
                file=console,
                flush=True,
            )
            told = True

    await publisher.estop(on_retry=not_yet)
    if told:
        print("\re-stop delivered: the robot reports it e-stopped", file=console, flush=True)


async def _jog_loop(
    publisher: TeleopPublisher,
    chain: str,
    target: np.ndarray,
    keys: asyncio.Queue[str],
    step: float,
    period: float,
    console: TextIO,
    estops: list[asyncio.Task[None]],
) -> None:
    next_publish = time.monotonic()
    while True:
        if time.monotonic() >= next_publish:
            await publisher.target(chain, target)
            next_publish = time.monotonic() + period
        try:
            key = await asyncio.wait_for(keys.get(), max(0.0, next_publish - time.monotonic()))
        except (TimeoutError, asyncio.TimeoutError):  # 3.10's wait_for: the latter
            continue
        if key == "q":
            return
        if key in JOG_COMMANDS:
            await _jog_command(publisher, JOG_COMMANDS[key], console, estops)
            continue
        delta = jog_step(key, step)
        if delta is not None:
            target = target + delta
            next_publish = 0.0  # publish the move at once
            print(f"\rtarget {np.round(target, 3)}   ", end="", file=console, flush=True)
