"""Protected arming: logins on the embedded broker, the exposure check, the command allowlist,
a retained e-stop found at start-up."""

import asyncio
import contextlib
import json
import time

import aiomqtt
import pytest

from hilbot.driver.runtime.safety import Mode
from hilbot.driver.teleop import TeleopPublisher
from hilbot.driver.teleop.broker import EmbeddedBroker
from hilbot.driver.teleop.errors import BrokerUnreachable, InsecureBroker
from hilbot.driver.teleop.passwd import add_user
from hilbot.driver.teleop.settings import TeleopSettings, check_exposure, is_loopback

PREFIX = "hilbot/omx"


def embedded(kit, **fields):
    data = {**kit.fast.model_dump(), "embedded_port": 0, **fields}  # 0: read back the port
    return TeleopSettings.model_validate(data)


async def connect(port, **login):
    async with aiomqtt.Client("127.0.0.1", port, **login) as client:
        await client.publish(f"{PREFIX}/probe", b"1")


@pytest.mark.parametrize("how", ["settings", "password file"])
async def test_the_embedded_broker_with_a_login_refuses_anonymous_and_wrong_logins(
    kit, tmp_path, how
):
    if how == "settings":
        settings = embedded(kit, username="op", password="s3cret")
    else:
        add_user(tmp_path / "passwd", "op", "s3cret")
        assert (tmp_path / "passwd").read_text().startswith("op:$argon2")
        settings = embedded(
            kit, username="op", password="s3cret", password_file=tmp_path / "passwd"
        )
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, None, settings) as bridge,
    ):
        port = bridge.url.port
        for login in ({}, {"username": "op", "password": "wrong"}, {"username": "eve"}):
            with pytest.raises(aiomqtt.MqttCodeError):
                await connect(port, **login)
        await connect(port, username="op", password="s3cret")
        # The anonymous 'enable' that armed the robot before is refused at the door.
        with pytest.raises(aiomqtt.MqttCodeError):
            async with TeleopPublisher(f"mqtt://127.0.0.1:{port}", PREFIX) as pub:
                await pub.command("enable")
        assert runtime.mode is Mode.DISARMED


async def test_a_login_checked_against_the_password_file_leaves_the_event_loop_running(tmp_path):
    # The argon2 hash of a login takes 0.3-1.2 s on a 2-core host: on the event loop it
    # stalled everything else of the process (the bridge's own connects timed out under load).
    add_user(tmp_path / "passwd", "op", "s3cret")
    async with EmbeddedBroker("127.0.0.1", 0, password_file=tmp_path / "passwd") as broker:
        gaps = []

        async def tick():
            while True:
                t = time.monotonic()
                await asyncio.sleep(0.005)
                gaps.append(time.monotonic() - t)

        ticker = asyncio.create_task(tick())
        try:
            t = time.monotonic()
            await connect(broker.port, username="op", password="s3cret")
            login = time.monotonic() - t
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
    # Far below the login's own time: the hash ran beside the loop, not on it.
    assert max(gaps) < 0.5 * login, (max(gaps), login)


async def test_a_bridge_whose_login_the_broker_refuses_fails_at_start(kit, tmp_path):
    add_user(tmp_path / "passwd", "op", "s3cret")
    settings = embedded(kit, username="op", password="nope", password_file=tmp_path / "passwd")
    async with kit.running_sim(chains=False) as runtime:
        with pytest.raises(BrokerUnreachable, match="cannot connect to the MQTT broker"):
            async with kit.serving(runtime, None, settings):
                pass


def test_is_loopback():
    assert all(map(is_loopback, ["127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.5", "broker.example.com", "::"]))


@pytest.mark.parametrize(
    ("url", "fields", "refused"),
    [
        (None, {}, False),
        (None, {"embedded_host": "0.0.0.0"}, True),
        (None, {"embedded_host": "0.0.0.0", "username": "op", "password": "pw"}, False),
        (None, {"embedded_host": "0.0.0.0", "username": "op"}, True),  # no password
        ("mqtt://127.0.0.1:1883", {}, False),
        ("mqtt://broker.lan:1883", {}, True),
        ("mqtts://broker.lan", {"username": "op", "password": "pw"}, False),
        ("mqtts://op@broker.lan", {"password": "pw"}, False),
    ],
    ids=[
        "embedded-loopback",
        "embedded-any-address",
        "embedded-any-address-login",
        "embedded-user-only",
        "remote-url-loopback",
        "remote-no-login",
        "remote-login",
        "remote-user-in-url",
    ],
)
def test_a_broker_beyond_loopback_needs_a_login(url, fields, refused):
    settings = TeleopSettings(**fields)
    if refused:
        with pytest.raises(InsecureBroker, match="--insecure"):
            check_exposure(settings, url, insecure=False)
        (warning,) = check_exposure(settings, url, insecure=True)
        assert warning.startswith("--insecure")
    else:
        assert check_exposure(settings, url, insecure=False) == []


def test_a_password_in_the_url_is_accepted_with_a_warning():
    (warning,) = check_exposure(TeleopSettings(), "mqtts://op:pw@broker.lan:8883", insecure=False)
    assert "HILBOT_MQTT_PASSWORD" in warning and "pw" not in warning


def test_the_allowlist_must_keep_estop():
    with pytest.raises(ValueError, match="must include estop"):
        TeleopSettings(allowed_commands=["disable"])
    settings = TeleopSettings(allowed_commands=["estop", "disable"])
    assert settings.command_allowed("disable") and not settings.command_allowed("enable")


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "worker"])
async def test_commands_outside_the_allowlist_are_refused_on_the_error_topic(
    kit, mosquitto, isolate
):
    data = {**kit.fast.model_dump(), "allowed_commands": ["estop", "disable"]}
    settings = TeleopSettings.model_validate(data)
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url, settings, isolate=isolate),
        TeleopPublisher(mosquitto.url, PREFIX) as pub,
    ):
        seq = await pub.command("enable")
        await pub.wait_until(lambda p: any(e.get("seq") == seq for e in p.errors))
        error = next(e for e in pub.errors if e.get("seq") == seq)
        assert error["reason"] == "refused" and error["topic"] == f"{PREFIX}/cmd"
        assert "'enable' is not accepted over MQTT" in error["detail"]
        assert "allowed_commands: disable, estop" in error["detail"]
        assert runtime.mode is Mode.DISARMED
        await pub.command("estop")  # always accepted
        await kit.eventually(lambda: runtime.mode is Mode.ESTOPPED, what="estopped")


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "worker"])
async def test_a_retained_estop_is_reported_with_the_command_that_clears_it(
    kit, mosquitto, caplog, isolate
):
    async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
        await client.publish(f"{PREFIX}/cmd", json.dumps({"command": "estop"}), qos=1, retain=True)
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url, isolate=isolate),
        TeleopPublisher(mosquitto.url, PREFIX) as pub,
    ):
        await kit.eventually(lambda: runtime.mode is Mode.ESTOPPED, what="estopped")
        await pub.wait_until(
            lambda p: (
                p.status is not None
                and p.status["retained_estop"] is not None
                and p.status["mode"] == "estopped"
            )
        )
        note = pub.status["retained_estop"]
        clear = f"mosquitto_pub -h 127.0.0.1 -p {mosquitto.port} -t {PREFIX}/cmd -r -n"
        assert note["topic"] == f"{PREFIX}/cmd" and note["clear"] == clear
        if not isolate:  # the worker logs to its own stderr, the terminal
            assert any(clear in r.getMessage() for r in caplog.records)
        # The command it names clears it (what mosquitto_pub -r -n sends): the status
        # says so, and the next start is not e-stopped.
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
            await client.publish(f"{PREFIX}/cmd", b"", qos=1, retain=True)
        await pub.wait_until(lambda p: p.status is not None and not p.status["retained_estop"])
        assert not [e for e in pub.errors if e["topic"] == f"{PREFIX}/cmd"]
    async with (
        kit.running_sim(chains=False) as runtime,
        kit.serving(runtime, mosquitto.url, isolate=isolate),
    ):
        await asyncio.sleep(0.3)
        assert runtime.mode is Mode.DISARMED


def test_the_clear_command_of_a_retained_estop_carries_the_login_and_tls():
    from hilbot.driver.teleop.bridge import RetainedEstop
    from hilbot.driver.teleop.client import parse_broker_url

    plain = RetainedEstop("hilbot/omx/cmd", parse_broker_url("mqtt://127.0.0.1:1884"))
    assert plain.clear_command == "mosquitto_pub -h 127.0.0.1 -p 1884 -t hilbot/omx/cmd -r -n"
    tls = RetainedEstop("hilbot/omx/cmd", parse_broker_url("mqtts://b.lan"), "op", "ca.pem")
    assert tls.clear_command == (
        "mosquitto_pub -h b.lan -p 8883 --cafile ca.pem -u op -t hilbot/omx/cmd -r -n "
        '-P "$HILBOT_MQTT_PASSWORD"'
    )
    assert tls.as_json()["clear"] == tls.clear_command and "reset" in tls.explain()
