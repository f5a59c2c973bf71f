"""A command that fails on the bus is answered on ``error`` and never jams the command channel.

The robots run on the virtual Dynamixel bus (its own ``hilbot sim-bus`` process) through
the real backend; commands go through a real mosquitto, in process and through the
teleop worker process as ``hilbot run`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from hilbot.driver.runtime.backends import build_backend
from hilbot.driver.runtime.config import parse_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.teleop import TeleopPublisher
from hilbot.driver.teleop.serve import receive
from hilbot.driver.teleop.worker import CommandRefused, RemoteRuntime

PREFIX = "hilbot/omx"  # kit.serving names every robot "omx"
ROBOTS = Path(__file__).resolve().parents[3] / "configs" / "robots"
ISOLATE = pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "worker"])


@contextlib.asynccontextmanager
async def running_virtual(name: str) -> AsyncIterator[Runtime]:
    data = yaml.safe_load((ROBOTS / f"{name}.yaml").read_text())
    config = parse_config(data, base_dir=ROBOTS)
    async with build_backend(config, "virtual") as backend, Runtime(config, backend) as runtime:
        yield runtime


def sim_bus_pids() -> list[int]:
    """The ``hilbot sim-bus`` processes this test process started."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == me and b"sim-bus" in cmdline:
            found.append(int(entry.name))
    return found


async def error_about(kit, pub: TeleopPublisher, command: str, since: int) -> str:
    """The detail of the first ``error`` message after ``since`` that names ``command``."""

    def found() -> list[str]:
        details = [e["detail"] for e in pub.errors[since:]]
        return [d for d in details if d.startswith(f"{command}:")]

    await kit.eventually(found, timeout=10, what=f"an error about {command}")
    return found()[0]


async def expect(kit, pub, runtime, command: str, mode: Mode) -> None:
    await pub.command(command)
    await kit.eventually(lambda: runtime.mode is mode, timeout=10, what=f"{command} -> {mode}")


@ISOLATE
async def test_reboot_on_protocol_1_is_refused_and_the_next_commands_run(kit, mosquitto, isolate):
    async with (
        running_virtual("hexapod") as runtime,
        kit.serving(runtime, mosquitto.url, isolate=isolate),
        TeleopPublisher(mosquitto.url, PREFIX) as pub,
    ):
        await pub.command("reboot")
        detail = await error_about(kit, pub, "reboot", 0)
        assert "Protocol 1.0" in detail and "no reboot" in detail, detail
        assert "\n" not in detail
        await expect(kit, pub, runtime, "enable", Mode.ARMED)
        await expect(kit, pub, runtime, "estop", Mode.ESTOPPED)
        await expect(kit, pub, runtime, "reset", Mode.DISARMED)
        await expect(kit, pub, runtime, "enable", Mode.ARMED)


@ISOLATE
async def test_a_command_the_bus_does_not_answer_is_reported_and_commands_keep_working(
    kit, mosquitto, isolate, caplog, capfd
):
    async with (
        running_virtual("openmanipulator_x") as runtime,
        kit.serving(runtime, mosquitto.url, isolate=isolate),
        TeleopPublisher(mosquitto.url, PREFIX) as pub,
    ):
        await expect(kit, pub, runtime, "enable", Mode.ARMED)
        [bus] = sim_bus_pids()
        os.kill(bus, signal.SIGSTOP)  # the servos stop answering
        try:
            seen = len(pub.errors)
            await pub.command("disable")
            detail = await error_about(kit, pub, "disable", seen)
        finally:
            os.kill(bus, signal.SIGCONT)
        assert "\n" not in detail
        # The bus answers again: the command channel works, the robot can be re-armed
        # (whether the outage faulted it or not).
        await expect(kit, pub, runtime, "estop", Mode.ESTOPPED)
        await expect(kit, pub, runtime, "reset", Mode.DISARMED)
        await expect(kit, pub, runtime, "enable", Mode.ARMED)
    logged = caplog.text + capfd.readouterr().err  # the worker logs to its stderr
    assert "never retrieved" not in logged and "Traceback" not in logged, logged


async def test_a_command_in_the_worker_never_outwaits_the_control_process():
    # The worker's side of the real channel (a socket pair, as hilbot run opens it).
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    control_reader, control_writer = await asyncio.open_connection(sock=theirs)
    runtime = RemoteRuntime(writer, ("arm",), ("joint1",), {})
    try:
        waiting = asyncio.create_task(runtime.command("enable"))
        assert (await receive(control_reader))[:1] == ("command",)
        control_writer.close()  # the control process goes without answering
        with pytest.raises(asyncio.IncompleteReadError):
            await receive(reader)  # what the worker's frame loop sees, then it tells:
        runtime.channel_closed()
        with pytest.raises(CommandRefused, match="closed the teleop channel"):
            await asyncio.wait_for(waiting, 2)
        with pytest.raises(CommandRefused, match="closed the teleop channel"):
            await asyncio.wait_for(runtime.command("reset"), 2)  # refused at once
    finally:
        writer.close()
