"""Who moves the arm during calibration: a person at the terminal, or the scripted hand."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import TextIO

from hilbot.driver.progress import Progress
from hilbot.sim.hand import Hand, Keyframes, Pose, move_to, still

#: How far the direction check moves a joint past the middle pose [rad].
NUDGE = 0.4
#: How often a wait for the hand's move looks whether it has ended [s].
HAND_POLL = 0.02


async def read_line(prompt: str) -> str:
    """``input(prompt)`` without blocking the event loop, in a daemon thread of its own.

    Not in the loop's executor: a Ctrl-C cancels the wait, and ``asyncio.run`` would then
    wait, for ever, for an executor thread blocked on a line nobody types.

    Raises:
        EOFError: the input ended (Ctrl-D at a terminal).
    """
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def settle(line: str | None, error: Exception | None) -> None:
        if answer.done():  # the wait was cancelled meanwhile
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(line or "")

    def read() -> None:
        line, error = None, None
        try:
            line = input(prompt)
        except Exception as exc:  # EOFError: to the task that waits for the line
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, line, error)

    threading.Thread(target=read, name="calibrate-input", daemon=True).start()
    return await answer


class TerminalGuide:
    """Prompts on a terminal; Enter moves on.

    Args:
        yes: answer every confirmation with yes (``--yes``, for scripts).
        stream: where prompts go (stdout by default); the live line goes to stderr.
    """

    def __init__(self, *, yes: bool = False, stream: TextIO | None = None) -> None:
        self.yes = yes
        self.stream = stream if stream is not None else sys.stdout
        self._line = Progress(1)

    async def _ask(self, prompt: str) -> str:
        try:
            return await read_line(prompt)
        except (asyncio.CancelledError, EOFError):
            print(file=self.stream, flush=True)  # end the prompt's line for what follows
            raise

    async def _enter(self, prompt: str) -> None:
        self._line.close()
        self._line = Progress(1)
        await self._ask(prompt)

    async def middle_pose(self, text: str, pose: Mapping[str, float]) -> None:
        """Describe the middle pose and wait for Enter."""
        angles = ", ".join(f"{j} {math.degrees(v):+.0f}°" for j, v in pose.items())
        self.say(f"\nStep 1: put the arm in its middle pose: {text}\n  ({angles})")
        await self._enter("Press Enter when the arm is there. ")

    async def full_range(self, joints: Sequence[str]) -> None:
        """Ask for every joint end to end; the live line shows min/max; wait for Enter."""
        self.say(
            "\nStep 2: move every joint slowly through its full range, end stop to end stop "
            f"({', '.join(joints)}); the line below shows what each has reached."
        )
        await self._enter("Press Enter when every joint has been to both ends.\n")

    async def positive(self, joint: str) -> None:
        """Ask for ``joint`` to be moved the positive way."""
        self.say(
            f"Step 3: move {joint} a little (about 20°) the positive way: counter-clockwise "
            "about its URDF axis, seen from the axis' tip."
        )

    async def confirm(self, question: str) -> bool:
        """Ask ``question`` [y/N] (yes at once with ``--yes``)."""
        if self.yes:
            self.say(f"{question} yes (--yes)")
            return True
        answer = await self._ask(f"{question} [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    def say(self, text: str) -> None:
        """Print ``text``."""
        self._line.clear_line()
        print(text, file=self.stream, flush=True)

    def status(self, line: str) -> None:
        """Redraw the live line."""
        self._line.show(line)

    def close(self) -> None:
        """End the live line."""
        self._line.close()


class HandGuide(TerminalGuide):
    """``--demo``: prints the prompts and lets the scripted hand do what they ask.

    Args:
        hand: the hand on the virtual bus.
        ranges: ``{joint: (lower, upper)}`` the hand sweeps (the arm's real range).
        stream: where prompts go.
    """

    def __init__(
        self,
        hand: Hand,
        ranges: Mapping[str, tuple[float, float]],
        *,
        stream: TextIO | None = None,
        seconds: float = 0.6,
    ) -> None:
        super().__init__(yes=True, stream=stream)
        self.hand = hand
        self.ranges = dict(ranges)
        self.seconds = seconds
        self._pose: dict[str, float] = {}

    async def _perform(self, motion: Keyframes) -> None:
        """Play ``motion`` and wait for its end, in this task: a Ctrl-C ends the wait at once.

        (Waiting in a thread, as ``Hand.perform`` does, left ``asyncio.run`` waiting at
        Ctrl-C for a thread whose motion the stopped hand would never finish.)
        """
        done = self.hand.play(motion)
        try:
            while not done.is_set():
                await asyncio.sleep(HAND_POLL)
        except asyncio.CancelledError:
            self.hand.play(still())  # the hand lets the arm rest where it is
            raise

    async def middle_pose(self, text: str, pose: Mapping[str, float]) -> None:
        """The hand puts the arm in the middle pose."""
        angles = ", ".join(f"{j} {math.degrees(v):+.0f}°" for j, v in pose.items())
        self.say(f"\nStep 1: put the arm in its middle pose: {text}\n  ({angles})")
        self.say("  [demo] the hand moves the arm there")
        self._pose = {j: v for j, v in pose.items() if j in self.hand.joints}
        await self._perform(move_to(self._pose, 2 * self.seconds))

    async def full_range(self, joints: Sequence[str]) -> None:
        """The hand sweeps each joint end to end."""
        self.say(
            "\nStep 2: move every joint slowly through its full range, end stop to end stop; "
            "the line below shows what each has reached.\n  [demo] the hand sweeps each joint"
        )
        await self.sweep(joints)
        self.status("")
        self._line.close()

    async def sweep(self, joints: Sequence[str]) -> None:
        """The hand sweeps ``joints`` end to end, all at once (it has a finger for each)."""
        ranges = {j: self.ranges[j] for j in joints if j in self.ranges}
        await self._perform(sweep_together(ranges, self._pose, self.seconds))

    async def positive(self, joint: str) -> None:
        """The hand nudges ``joint`` the positive way and back."""
        await super().positive(joint)
        upper = self.ranges[joint][1]
        start = self._pose.get(joint, 0.0)
        self.hand.play(
            Keyframes(
                (
                    (self.seconds, {joint: min(start + NUDGE, upper)}),
                    (self.seconds, {joint: start}),
                )
            )
        )


def sweep_together(
    ranges: Mapping[str, tuple[float, float]], center: Pose, seconds: float
) -> Keyframes:
    """Every joint of ``ranges`` from ``center`` to its lower end, its upper end and back.

    All at once: the demo's step 2 takes the same few seconds for 5 joints or 18. Each
    end is held for ``seconds``, so the live reading sees it even on a busy host.
    """
    rest = {j: center.get(j, 0.5 * (lo + hi)) for j, (lo, hi) in ranges.items()}
    lows = {j: lo for j, (lo, _) in ranges.items()}
    highs = {j: hi for j, (_, hi) in ranges.items()}
    return Keyframes(
        (
            (seconds, rest),
            (seconds, lows),
            (seconds, lows),  # a hand pushes against the end stops for a moment
            (2 * seconds, highs),
            (seconds, highs),
            (seconds, rest),
        )
    )
