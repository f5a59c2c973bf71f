"""Broker URLs with IPv6 hosts and odd ports: one line naming the URL, or a URL that works.

``hilbot run --broker-host ::1`` built ``mqtt://::1:PORT`` and then refused it; an
unclosed bracket (``mqtt://[::1``) was a traceback from urlsplit; port 0 quietly became
1883. The end-to-end tests run the real command and its embedded broker on ::1.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

import aiomqtt
import pytest

from hilbot.driver.teleop import BrokerUrlError, parse_broker_url
from hilbot.driver.teleop.broker import EmbeddedBroker
from hilbot.driver.teleop.client import BrokerUrl
from hilbot.driver.teleop.publisher import TeleopPublisher

WAIT = 120.0  # [s] start-up imports on a busy machine


def _ipv6_loopback_problem() -> str | None:
    if not socket.has_ipv6:
        return "this Python has no IPv6 (socket.has_ipv6 is false)"
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError as exc:
        return f"cannot bind the IPv6 loopback ::1 here: {exc}"
    return None


needs_ipv6 = pytest.mark.skipif(
    _ipv6_loopback_problem() is not None, reason=str(_ipv6_loopback_problem())
)


def _free_ipv6_port() -> int:
    with socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("mqtt://[::1", "unmatched bracket"),
        ("mqtt://::1]:1883", "unmatched bracket"),
        ("mqtt://::1", "an IPv6 address goes in brackets"),
        ("mqtt://::1:28566", "an IPv6 address goes in brackets"),
        ("mqtt://[broker.lan]:1883", "brackets hold"),
        ("mqtt://[::1]x:1883", "only :port may follow"),
        ("mqtt://127.0.0.1:0", "the port must be a number in 1..65535"),
        ("mqtt://[::1]:0", "the port must be a number in 1..65535"),
    ],
    ids=["open bracket", "close bracket", "bare", "bare with port", "name", "junk", "0", "v6 0"],
)
def test_a_bad_host_or_port_is_a_broker_url_error_naming_the_url(url: str, problem: str) -> None:
    with pytest.raises(BrokerUrlError) as info:
        parse_broker_url(url)
    assert info.value.url == url and problem in info.value.problem
    assert repr(url) in str(info.value)


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("mqtt://[::1]:28566", "::1", 28566),
        ("[::1]", "::1", 1883),
        ("mqtts://op@[2001:db8::5]", "2001:db8::5", 8883),
        ("mqtt://[fe80::1%25eth0]:1884", "fe80::1%eth0", 1884),
        ("mqtt://broker.lan:", "broker.lan", 1883),  # no port: the default
    ],
)
def test_ipv6_hosts_parse_and_print_back_bracketed(url: str, host: str, port: int) -> None:
    parsed = parse_broker_url(url)
    assert (parsed.host, parsed.port) == (host, port)
    again = parse_broker_url(str(parsed))
    assert (again.host, again.port, again.tls) == (host, port, parsed.tls)


def test_a_built_ipv6_url_has_brackets() -> None:
    assert str(BrokerUrl("::1", 28566)) == "mqtt://[::1]:28566"
    assert str(BrokerUrl("127.0.0.1", 1883, tls=True)) == "mqtts://127.0.0.1:1883"
    assert EmbeddedBroker("::1", 28566).url == "mqtt://[::1]:28566"
    assert EmbeddedBroker("[::1]", 28566).host == "::1"


def _hilbot(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HILBOT_MQTT_")}
    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=WAIT,
        stdin=subprocess.DEVNULL,
        env=environment,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--backend", "sim", "--duration", "30"],
        ["teleop"],
        ["lead", "koch_v1_1_leader", "--backend", "virtual"],
    ],
    ids=["run", "teleop", "lead"],
)
@pytest.mark.parametrize("url", ["mqtt://[::1", "mqtt://127.0.0.1:0"], ids=["bracket", "port 0"])
def test_the_commands_tell_a_bad_url_in_one_line_naming_it(command: list[str], url: str) -> None:
    result = _hilbot(*command, "--mqtt", url)
    err = result.stderr
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"hilbot {command[0]}: broker URL {url!r}: "), err
    assert result.returncode in (1, 2), (result.returncode, err)


@needs_ipv6
async def test_the_embedded_broker_serves_on_ipv6_loopback() -> None:
    async with (
        EmbeddedBroker("::1", 0) as broker,
        TeleopPublisher(broker.url, "hilbot/v6") as publisher,
    ):
        assert broker.url == f"mqtt://[::1]:{broker.port}"
        # The publisher follows the robot's error topic: a message there comes back.
        await publisher.client.publish(publisher.topics.error, b'{"detail": "hello"}')
        await publisher.wait_until(lambda p: bool(p.errors), timeout=10.0)
        assert publisher.errors == [{"detail": "hello"}]


@needs_ipv6
async def test_hilbot_run_on_broker_host_ipv6_loopback_serves_teleop() -> None:
    port = _free_ipv6_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HILBOT_MQTT_")}
    run = subprocess.Popen(
        [sys.executable, "-m", "hilbot", "run", "--backend", "sim", "--no-status",
         "--broker-host", "::1", "--broker-port", str(port), "--duration", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=environment,
    )  # fmt: skip
    try:
        state = await _first_state(f"mqtt://[::1]:{port}", run)
        assert state["mode"] == "disarmed"
        assert run.poll() is None  # before: it exited 2 once its broker was up
    finally:
        run.terminate()
        _, err = run.communicate(timeout=WAIT)
    assert "Traceback" not in err, err
    assert "broker URL" not in err, err


async def _first_state(url: str, run: subprocess.Popen[str]) -> dict[str, object]:
    deadline = time.monotonic() + WAIT
    while True:
        if run.poll() is not None:
            _, err = run.communicate()
            pytest.fail(f"hilbot run ended ({run.returncode}) before serving: {err}")
        try:
            async with TeleopPublisher(url, "hilbot/openmanipulator_x") as publisher:
                await publisher.wait_until(lambda p: p.state is not None, timeout=30.0)
                assert publisher.state is not None
                return publisher.state
        except (aiomqtt.MqttError, OSError, TimeoutError):  # not listening yet
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"no state from hilbot run on {url} within {WAIT} s")
        await asyncio.sleep(0.2)
