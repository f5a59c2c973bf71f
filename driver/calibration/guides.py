"""Who moves the arm during calibration: a person at the terminal, or the scripted hand."""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from hilbot.driver.bench.progress import Progress
from hilbot.sim.hand import Hand, Keyframes, move_to, sweep

#: How far the direction check moves a joint past the middle pose [rad].
NUDGE = 0.4


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

    async def _enter(self, prompt: str) -> None:
        self._line.close()
        self._line = Progress(1)
        await asyncio.to_thread(input, prompt)

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
        answer = await asyncio.to_thread(input, f"{question} [y/N] ")
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
        await asyncio.to_thread(self.hand.perform, motion)

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
        ranges = {j: self.ranges[j] for j in joints if j in self.ranges}
        await self._perform(sweep(ranges, self._pose, seconds=self.seconds))
        self.status("")
        self._line.close()

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
