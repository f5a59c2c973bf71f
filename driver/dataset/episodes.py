"""Record episodes the way ``lerobot-record`` does: timed episodes, a reset between, keys.

Frames are taken at the dataset's fps on absolute deadlines (the loop runs at its own,
higher rate; each frame is its latest state and command: a zero-order-hold resampling).
Keys, when the terminal is one: right arrow or ``n`` ends the episode (or the reset)
early, left arrow or ``r`` records the episode again, Esc or ``q`` stops recording.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hilbot.driver.dataset.features import DatasetFeatures
    from hilbot.driver.dataset.writer import DatasetWriter

NEXT, RERECORD, STOP = "next", "rerecord", "stop"
_KEYS = {b"\x1b[C": NEXT, b"n": NEXT, b"\x1b[D": RERECORD, b"r": RERECORD, b"\x1b": STOP}
_KEYS[b"q"] = STOP

#: One frame: (observed joint positions, commanded joint positions), hilbot joint -> rad or
#: m; ``None`` before the first reading.
Sample = Callable[[], "tuple[Mapping[str, float], Mapping[str, float]] | None"]


def key_event(data: bytes) -> str | None:
    """The episode control ``data`` (bytes read from the terminal) asks for, if any."""
    return _KEYS.get(data) or _KEYS.get(data[-1:]) if data else None


@contextlib.contextmanager
def terminal_keys(queue: asyncio.Queue[str]) -> Iterator[bool]:
    """Put the episode keys pressed on stdin into ``queue``; yields whether it can.

    Only where stdin is a terminal (it is put in cbreak mode and restored); elsewhere the
    timed flow runs alone.
    """
    if not sys.stdin.isatty() or os.name != "posix":
        yield False
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    loop = asyncio.get_running_loop()

    def readable() -> None:
        event = key_event(os.read(fd, 16))
        if event is not None:
            queue.put_nowait(event)

    tty.setcbreak(fd)
    loop.add_reader(fd, readable)
    try:
        yield True
    finally:
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def _wait(queue: asyncio.Queue[str], seconds: float) -> str | None:
    """A key pressed within ``seconds``, or ``None``."""
    try:
        return await asyncio.wait_for(queue.get(), max(0.0, seconds))
    except asyncio.TimeoutError:
        return None


async def record_episodes(
    writer: DatasetWriter,
    features: DatasetFeatures,
    sample: Sample,
    *,
    task: str,
    episodes: int,
    episode_time: float,
    reset_time: float,
    say: Callable[[str], None],
    keys: asyncio.Queue[str] | None = None,
) -> int:
    """Record ``episodes`` episodes of ``episode_time`` s each; returns how many were written."""
    queue: asyncio.Queue[str] = keys if keys is not None else asyncio.Queue()
    period = 1.0 / writer.fps
    written = 0
    while written < episodes:
        index = writer.begin(task)
        say(f"recording episode {index} ({written + 1}/{episodes}, {episode_time:g} s)")
        start = time.monotonic()
        total = max(1, round(episode_time * writer.fps))
        event = None
        while writer.frames < total:
            # every deadline passed gets a frame: one woken late repeats the latest
            # sample for the frames it missed, so the timestamps stay true
            due = min(total, int((time.monotonic() - start) / period) + 1)
            got = sample()
            if got is not None:
                state, action = features.vector(got[0]), features.vector(got[1])
                for _ in range(max(1, due - writer.frames)):
                    writer.add(state, action)
            if writer.frames >= total:
                break
            event = await _wait(queue, start + writer.frames * period - time.monotonic())
            if event is not None:
                break
        if event == RERECORD:
            writer.discard()
            say(f"re-recording episode {index}")
            continue
        frames = await asyncio.to_thread(writer.end)
        written += 1 if frames else 0
        say(f"episode {index} saved: {frames} frames")
        if event == STOP or written >= episodes:
            break
        if reset_time > 0:
            say(f"reset the scene ({reset_time:g} s; right arrow or n skips)")
            if await _wait(queue, reset_time) == STOP:
                break
    return written
