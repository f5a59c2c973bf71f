"""``hilbot run`` through the real command line: broker problems end in one line, exit 2."""

import os
import socket
import subprocess
import sys

import pytest

WAIT = 120.0  # [s] start-up imports on a busy machine; the runs themselves end at once


def hilbot_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HILBOT_MQTT_")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "hilbot", "run", "--backend", "sim", "--duration", "30", *args],
        capture_output=True,
        text=True,
        timeout=WAIT,
        stdin=subprocess.DEVNULL,
        env=environment,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    err = result.stderr
    assert "Traceback" not in err and "ExceptionGroup" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hilbot run: "), err
    assert result.returncode == 2, (result.returncode, err)
    return lines[0]


@pytest.fixture
def busy_port():
    """A port something already listens on (as a first hilbot run's broker would)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_busy_embedded_broker_port_names_the_port_and_the_option(busy_port):
    line = one_line(hilbot_run("--broker-port", str(busy_port)))
    assert f"port {busy_port} is in use" in line
    assert "--broker-port PORT" in line


def test_a_second_run_on_the_configured_port_says_so(busy_port, config_data_of, write_yaml):
    data = config_data_of("openmanipulator_x")
    data["teleop"] = {**data.get("teleop", {}), "embedded_port": busy_port}
    config = write_yaml(data)
    line = one_line(hilbot_run(str(config)))
    assert f"port {busy_port} is in use" in line and "--broker-port" in line


def test_an_unreachable_broker(busy_port):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]  # nothing listens once this closes
    line = one_line(hilbot_run("--mqtt", f"mqtt://127.0.0.1:{closed}"))
    assert f"cannot connect to the MQTT broker mqtt://127.0.0.1:{closed}" in line


@pytest.mark.parametrize(
    ("url", "problem"),
    [("ftp://host", "unknown scheme 'ftp'"), ("mqtt://host:99999", "the port must be")],
    ids=["scheme", "port"],
)
def test_a_bad_broker_url(url, problem):
    line = one_line(hilbot_run("--mqtt", url))
    assert problem in line and url in line


def test_an_embedded_broker_on_another_address_without_a_login_is_refused():
    line = one_line(hilbot_run("--broker-host", "0.0.0.0", "--broker-port", "0"))
    assert "reachable beyond this machine" in line and "--insecure" in line
    assert "HILBOT_MQTT_USERNAME" in line


def test_a_remote_broker_without_a_login_is_refused():
    line = one_line(hilbot_run("--mqtt", "mqtt://192.0.2.1:1883"))  # TEST-NET-1: never routed
    assert "mqtt://192.0.2.1:1883 is reachable beyond this machine" in line


def test_broker_options_with_another_broker_are_refused():
    line = one_line(hilbot_run("--mqtt", "mqtt://127.0.0.1:1", "--broker-port", "1884"))
    assert "--broker-port is for the embedded broker" in line


def test_with_a_login_the_embedded_broker_on_any_address_starts(mosquitto):
    # The login comes from the environment; the run ends after its --duration.
    result = hilbot_run(
        "--broker-host",
        "0.0.0.0",
        "--broker-port",
        "0",
        "--duration",
        "1",
        env={"HILBOT_MQTT_USERNAME": "op", "HILBOT_MQTT_PASSWORD": "s3cret"},
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


def test_a_password_in_the_url_is_warned_about(mosquitto):
    url = f"mqtt://op:s3cret@127.0.0.1:{mosquitto.port}"
    result = hilbot_run("--mqtt", url, "--duration", "1")
    assert result.returncode == 0, result.stderr
    assert "HILBOT_MQTT_PASSWORD" in result.stderr and "s3cret" not in result.stderr
