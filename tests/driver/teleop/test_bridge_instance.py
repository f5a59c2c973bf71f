"""One driver per robot name: two ``hilbot run`` processes on one real mosquitto.

A second driver of the same name refuses to start in one line; with
``--takeover`` it starts and the first one stops; a will of the name that
overwrites the live driver's retained status is overwritten again.
"""

import asyncio
import json
import os
import sys

import aiomqtt

STATUS = "hilbot/openmanipulator_x/status"
WAIT = 120.0  # [s] start-up imports on a busy machine


def _environment():
    return {k: v for k, v in os.environ.items() if not k.startswith("HILBOT_MQTT_")}


async def start_run(url, *args):
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hilbot",
        "run",
        "--backend",
        "sim",
        "--mqtt",
        url,
        "--no-status",
        "--duration",
        "300",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_environment(),
    )


async def ended(process, timeout=WAIT):
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode, stdout.decode(), stderr.decode()


class StatusWatch:
    """Follows the robot's retained status topic with a real client."""

    def __init__(self, client):
        self.client = client
        self.seen = []

    async def until(self, predicate, timeout=WAIT, what="status"):
        async def wait():
            if self.seen and predicate(self.seen[-1]):
                return self.seen[-1]
            async for message in self.client.messages:
                status = json.loads(message.payload) if message.payload else {}
                self.seen.append(status)
                if predicate(status):
                    return status

        try:
            return await asyncio.wait_for(wait(), timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise AssertionError(f"{what} not seen within {timeout} s: {self.seen}") from None


async def die_with_a_will(port, status):
    """A client whose will is ``status`` on the robot's status topic, killed (SIGKILL)."""
    code = (
        "import asyncio, sys, aiomqtt\n"
        "async def main():\n"
        f"    will = aiomqtt.Will({STATUS!r}, {json.dumps(status)!r}, qos=1, retain=True)\n"
        f"    async with aiomqtt.Client('127.0.0.1', {port}, will=will):\n"
        "        print('up', flush=True)\n"
        "        await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    assert await asyncio.wait_for(process.stdout.readline(), WAIT) == b"up\n"
    process.kill()
    await process.wait()


async def test_a_second_driver_refuses_a_taker_stops_the_first_and_a_will_is_undone(mosquitto):
    running = []
    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
        await client.subscribe(STATUS, qos=1)
        watch = StatusWatch(client)
        try:
            first = await start_run(mosquitto.url)
            running.append(first)
            online = await watch.until(lambda s: s.get("online"), what="the first driver online")
            first_id = online["instance"]
            assert online["takeover"] is False and len(first_id) == 16

            # A second driver of the same name: one line naming the remedies, exit 2.
            code, _, err = await ended(await start_run(mosquitto.url))
            assert code == 2, err
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in err, err
            assert lines[0].startswith(f"hilbot run: another driver {first_id} is online")
            assert "teleop.prefix" in lines[0] and "--takeover" in lines[0]
            assert first.returncode is None

            # With --takeover it starts, and the first one stops obeying and exits.
            taker = await start_run(mosquitto.url, "--takeover")
            running.append(taker)
            status = await watch.until(
                lambda s: s.get("online") and s.get("instance") != first_id,
                what="the taker online",
            )
            taker_id = status["instance"]
            assert status["takeover"] is True
            code, _, err = await ended(first)
            assert code == 2 and f"driver {taker_id} took over" in err, err

            # A will of the name overwrites the status: the live driver publishes it again.
            await die_with_a_will(mosquitto.port, {"online": False, "instance": first_id})
            await watch.until(lambda s: s.get("online") is False, what="the will's offline status")
            again = await watch.until(
                lambda s: s.get("online") and s.get("instance") == taker_id,
                timeout=10,
                what="the taker's status published again",
            )
            assert again["takeover"] is True
            assert taker.returncode is None
        finally:
            for process in running:
                if process.returncode is None:
                    process.terminate()
                    await ended(process)
