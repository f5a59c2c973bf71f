"""The ``--dataset`` options of ``hilbot lead`` and ``hilbot run``, and the recording task."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hilbot.driver.commands.failures import positive_hz, positive_seconds

if TYPE_CHECKING:
    from hilbot.driver.runtime.config import RobotConfig
    from hilbot.hal.calibration import Calibration


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--dataset DIR --task T --episodes N --episode-time S --reset-time S --fps F``."""
    group = parser.add_argument_group(
        "dataset", "record a LeRobotDataset v3 of the follower (needs the dataset extra)"
    )
    group.add_argument("--dataset", type=Path, metavar="DIR", help="record episodes into DIR")
    group.add_argument("--task", help="--dataset: the task of the episodes (its words)")
    group.add_argument(
        "--episodes", type=_positive_int, default=50, metavar="N", help="episodes (default 50)"
    )
    group.add_argument(
        "--episode-time",
        type=positive_seconds,
        default=60.0,
        metavar="S",
        help="seconds per episode (default 60)",
    )
    group.add_argument(
        "--reset-time",
        type=_seconds,
        default=60.0,
        metavar="S",
        help="seconds to reset the scene between episodes (default 60)",
    )
    group.add_argument(
        "--fps", type=positive_hz, default=30.0, metavar="F", help="dataset frames/s (default 30)"
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    if text.strip() in ("0", "0.0"):
        return 0.0
    return float(positive_seconds(text))


def problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the dataset options, or ``None``."""
    if args.dataset is None:
        given = [o for o, v in (("--task", args.task),) if v is not None]
        return f"{given[0]} is for --dataset DIR" if given else None
    if not args.task:
        return '--dataset needs --task "what the episodes do" (LeRobot\'s task string)'
    if float(args.fps) != int(args.fps):
        return f"--fps must be a whole number of frames per second, got {args.fps:g}"
    return None


def say(text: str) -> None:
    """A recording message on stderr."""
    print(f"dataset: {text}", file=sys.stderr, flush=True)


def open_writer(
    args: argparse.Namespace,
    config: RobotConfig,
    calibration: Calibration | None,
    uncalibrated: RobotConfig | None = None,
) -> Any:
    """The writer and features for ``config``'s joints (raises ``DatasetError``)."""
    from hilbot.driver.dataset.features import features_for
    from hilbot.driver.dataset.writer import DatasetWriter

    features = features_for(config, calibration, uncalibrated=uncalibrated)
    writer = DatasetWriter(args.dataset, int(args.fps), features.names, features.robot_type)
    return writer, features


async def record(
    args: argparse.Namespace, runtime: Any, writer: Any, features: Any, *, keyboard: bool = True
) -> int:
    """Record the episodes from ``runtime``'s state (measured joints) and command.

    ``keyboard``: read the episode keys from the terminal (``False`` where something else
    reads it: ``hilbot run``'s local e-stop keys come first; the timed flow runs alone).
    """
    from hilbot.driver.dataset.episodes import record_episodes, terminal_keys

    def sample() -> tuple[dict[str, float], dict[str, float]] | None:
        state = runtime.state()
        if state.joints is None:
            return None
        return state.joints.positions(), state.command

    queue: asyncio.Queue[str] = asyncio.Queue()
    keys = terminal_keys(queue) if keyboard else contextlib.nullcontext(False)
    with keys as interactive:
        if interactive:
            say("keys: right arrow/n ends an episode, left arrow/r records it again, Esc/q stops")
        written = await record_episodes(
            writer,
            features,
            sample,
            task=args.task,
            episodes=args.episodes,
            episode_time=args.episode_time,
            reset_time=args.reset_time,
            say=say,
            keys=queue,
        )
    say(f"{written} episodes written to {args.dataset} ({writer.total_episodes} in all)")
    return int(written)
