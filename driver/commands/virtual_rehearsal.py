"""``--backend virtual`` for ``hilbot scan``, ``servo`` and ``doctor``: rehearse on no hardware.

The named robot's buses are served as virtual buses (Dynamixel or Feetech, as its
config's buses say) in a ``hilbot sim-bus`` child process, as ``hilbot run --backend
virtual`` does; the command then runs against their pseudo-terminals exactly as it
would against a USB adapter, and the buses are torn down when it ends (a change made
with ``hilbot servo`` lasts until then). Example::

    hilbot scan koch_v1_1_follower --backend virtual
    hilbot servo koch_v1_1_follower --backend virtual --id 1 --set-id 7
    hilbot doctor so101_follower --backend virtual
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

from hilbot.driver.runtime.backends import HARDWARE, backend_name

#: The backends of the bus tools: the adapter on ``--port``, or a virtual bus of a robot.
BACKENDS = (HARDWARE, "virtual")
#: The robot ``--backend virtual`` serves when none is named (as ``hilbot run``'s default).
DEFAULT_ROBOT = "openmanipulator_x"


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--backend hardware|virtual`` (``dynamixel``, the old name, still accepted)."""
    parser.add_argument(
        "--backend",
        type=backend_name,
        choices=BACKENDS,
        default=HARDWARE,
        help="hardware: the adapter on --port (default); virtual: a virtual bus of the named "
        "robot (its config's servos, ids, baud rate and family) in a child process, torn down "
        "when the command ends: rehearse without hardware",
    )


def virtual_problem(args: argparse.Namespace, robot: str | None) -> str | None:
    """What is wrong with ``--backend`` and ``--port`` together, if anything."""
    if args.backend == "virtual" and args.port is not None:
        return (
            "--port is for --backend hardware; --backend virtual serves the robot's buses on "
            "ports of its own (drop --port)"
        )
    if args.backend != "virtual" and robot is not None:
        return f"a robot name ({robot}) is for --backend virtual; on hardware give --port"
    return None


def load_robot(name: str | None) -> Any:
    """The config of the robot ``--backend virtual`` serves (a YAML file or a shipped name)."""
    from hilbot.driver.runtime.config import load_config

    return load_config(name or DEFAULT_ROBOT)


def virtual_margin(margin_ms: float) -> float:
    """Reply margin [ms] on a virtual bus: ``margin_ms``, or more if this host stalls now."""
    from hilbot.driver.runtime.backends import virtual_margin_ms

    return max(margin_ms, virtual_margin_ms(None))


def on_virtual_buses(config: Any, command: Callable[[dict[str, str]], int]) -> int:
    """Serve ``config``'s buses, run ``command({bus name: port})`` in a thread, tear them down.

    Returns what ``command`` returns. The buses' servos answer at once (Return Delay
    Time 0), as on an arm set up per docs/hardware.md.
    """
    from hilbot.driver.runtime.backends import virtual_buses

    async def serve() -> int:
        async with virtual_buses(config, return_delay_time=0) as ports:
            return await asyncio.to_thread(command, ports)

    return asyncio.run(serve())


def bus_line(config: Any, name: str, port: str) -> str:
    """The line naming one virtual bus: robot, bus, port, family or protocol, rate, ids."""
    bus = next(b for b in config.buses if b.name == name)
    from hilbot.hal.family import family

    kind = family(bus.family).describe(bus.protocol)
    ids = " ".join(str(s.id) for s in config.servo_specs(name))
    return (
        f"virtual bus {name} of {config.name}: {port} ({kind}, {bus.baudrate} bit/s, "
        f"servos {ids}); it ends with this command"
    )
