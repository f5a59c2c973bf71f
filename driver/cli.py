"""The ``hilbot`` command line.

Each subcommand lives in its own module under ``hilbot.driver.commands`` and
exposes ``HELP: str``, ``add_arguments(parser)`` and ``run(args) -> int``.
Modules are imported only when their subcommand runs, so ``hilbot --help``
stays fast and a missing optional dependency only affects its own command.

Expected errors (a bad option, config or port, an unreachable broker) end in one line,
``hilbot <command>: <what happened and what to do>``, and exit status 2 (bad input) or
1 (a failure while running), never a traceback (see ``hilbot.driver.commands.failures``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from hilbot import __version__

#: subcommand -> (module, one-line help). The help is repeated here so that
#: ``hilbot --help`` does not import every command module.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("hilbot.driver.commands.run", "run a robot (simulated by default)"),
    "teleop": ("hilbot.driver.commands.teleop", "publish teleop targets over MQTT"),
    "bench": ("hilbot.driver.commands.bench", "run bench scenarios and write a report"),
    "replay": ("hilbot.driver.commands.replay", "replay a recorded run against the simulator"),
    "scan": ("hilbot.driver.commands.scan", "list the Dynamixel or Feetech servos on a port"),
    "servo": ("hilbot.driver.commands.servo", "change a servo's id or baud rate safely"),
    "doctor": ("hilbot.driver.commands.doctor", "check a robot's bus set-up and timing budget"),
    "sim-bus": (
        "hilbot.driver.commands.sim_bus",
        "serve a virtual Dynamixel or Feetech bus on a pty",
    ),
    "calibrate": (
        "hilbot.driver.commands.calibrate",
        "calibrate an arm: offsets, ranges, directions",
    ),
    "lead": ("hilbot.driver.commands.lead", "drive a follower arm from a leader arm over MQTT"),
}


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line that points to ``--help``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _load(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


def build_parser(*, load: str | None = None) -> argparse.ArgumentParser:
    """Build the argument parser.

    Args:
        load: the subcommand whose module is imported so that its arguments
            are known; ``"*"`` imports all of them (tests use it).
    """
    parser = _Parser(
        prog="hilbot",
        description="hilbot: drive Dynamixel and Feetech arms, teleoperate them over MQTT, "
        "and bench-test them against a simulator.",
    )
    parser.add_argument("--version", action="version", version=f"hilbot {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module_name, help_text) in COMMANDS.items():
        if load not in (name, "*"):
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        module = _load(module_name)
        if module is None:
            continue
        command = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(command)
        command.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hilbot`` console script; returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    quick = build_parser()
    first, _ = quick.parse_known_args(args_list)
    if first.command is None:
        quick.print_help()
        return 0
    parser = build_parser(load=first.command)
    args, extra = parser.parse_known_args(args_list)
    if extra:  # said by the subcommand, whose options they were meant to be
        command = f"hilbot {args.command}"
        print(
            f"{command}: unrecognized arguments: {' '.join(extra)} (see {command} --help)",
            file=sys.stderr,
        )
        return 2
    module = getattr(args, "_module", None)
    if module is None:
        parser.error(f"the command {args.command!r} is not available in this install")
    _configure_logging(args.verbose)
    try:
        result: int = module.run(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from hilbot.driver.commands.failures import describe

        failure = describe(exc)
        if failure is None:
            raise  # a bug: keep its traceback
        print(f"hilbot {args.command}: {failure.message}", file=sys.stderr)
        return failure.exit_code
    return result


def _configure_logging(verbosity: int) -> None:
    import logging

    level = logging.WARNING - 10 * min(verbosity, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
