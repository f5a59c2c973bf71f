"""``hilbot teleop``: finds the robot on the broker, arms it, draws a pattern."""

import asyncio

import numpy as np

from hilbot.driver.cli import build_parser
from hilbot.driver.commands import teleop as command
from hilbot.driver.runtime.safety import Mode


def parse(*argv):
    return build_parser(load="teleop").parse_args(["teleop", *argv])


def test_the_command_parses_its_options():
    args = parse("--pattern", "figure8", "--radius", "0.05", "--plane", "xy", "--duration", "2")
    assert (args.pattern, args.radius, args.plane, args.duration) == ("figure8", 0.05, "xy", 2.0)
    assert args.mqtt == "mqtt://127.0.0.1:1883" and args.robot is None


async def test_hilbot_teleop_discovers_the_robot_and_moves_it(kit, mosquitto, capsys):
    async with kit.running_sim() as runtime, kit.serving(runtime, mosquitto.url):
        start = runtime.state().poses["arm"][:3, 3].copy()
        args = parse(
            "--mqtt", mosquitto.url, "--radius", "0.02", "--period", "2", "--duration", "3"
        )
        # The command runs its own event loop, as from the shell; here in a thread.
        done = asyncio.ensure_future(asyncio.to_thread(command.run, args))
        farthest = 0.0
        while not done.done():
            await asyncio.sleep(0.05)
            farthest = max(farthest, np.linalg.norm(runtime.state().poses["arm"][:3, 3] - start))
        assert done.result() == 0, capsys.readouterr().err
        assert "published" in capsys.readouterr().out
        assert runtime.mode is Mode.ARMED
        assert 0.015 < farthest < 0.05  # a 2 cm circle through the start: up to 4 cm away


async def test_hilbot_teleop_names_the_robots_it_found(mosquitto, capsys):
    assert await asyncio.to_thread(command.run, parse("--mqtt", mosquitto.url)) == 1
    err = capsys.readouterr().err
    assert "robots online on mqtt://127.0.0.1" in err and "none" in err


async def test_hilbot_teleop_says_why_the_robot_refused_to_arm(kit, mosquitto, caplog):
    async with kit.running_sim() as runtime, kit.serving(runtime, mosquitto.url):
        await runtime.command("estop")  # latched: enable is refused until a reset
        await kit.eventually(lambda: runtime.mode is Mode.ESTOPPED)
        args = parse("--mqtt", mosquitto.url, "--duration", "0.5")
        assert await asyncio.to_thread(command.run, args) == 0
        assert runtime.mode is Mode.ESTOPPED  # nothing armed it
    warnings = [r.getMessage() for r in caplog.records if "not armed" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    assert "estop" in warnings[0].lower() or "e-stop" in warnings[0].lower(), warnings[0]
