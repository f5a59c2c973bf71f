"""The small pure parts: settings and environment, URLs, backoff, the inbox, patterns."""

import math
import random

import numpy as np
import pydantic
import pytest
from aiomqtt import Message

from hilbot.driver.teleop import BrokerUrlError, TeleopSettings, Topics, parse_broker_url
from hilbot.driver.teleop.bridge import dispatching_queue
from hilbot.driver.teleop.client import Backoff
from hilbot.driver.teleop.publisher import Pattern, Plane, jog_step, pattern_offset


def test_settings_defaults_and_validation():
    s = TeleopSettings()
    assert s.topic_prefix("omx") == "hilbot/omx" and s.qos == 0 and s.embedded_port == 1883
    assert TeleopSettings(prefix="lab/arm1").topic_prefix("omx") == "lab/arm1"
    for bad in ({"prefix": "a/#"}, {"prefix": "/a"}, {"reconnect_min_s": 9.0}, {"qos": 3},
                {"colour": "red"}, {"tls": {"cert_file": "c.pem"}}):  # fmt: skip
        with pytest.raises(pydantic.ValidationError):
            TeleopSettings.model_validate(bad)
    with pytest.raises(pydantic.ValidationError):
        TeleopSettings().state_rate_hz = 5  # frozen


def test_environment_overrides_the_config():
    s = TeleopSettings(username="cfg", password="cfg-secret").with_environment(
        {
            "HILBOT_MQTT_PASSWORD": "env-secret",
            "HILBOT_MQTT_CA_FILE": "/etc/ca.pem",
            "HILBOT_MQTT_TLS_INSECURE": "yes",
        }
    )
    assert s.username == "cfg" and s.password.get_secret_value() == "env-secret"
    assert str(s.tls.ca_file) == "/etc/ca.pem" and s.tls.insecure is True
    assert "env-secret" not in repr(s)
    with pytest.raises(ValueError, match="HILBOT_MQTT_TLS_INSECURE"):
        TeleopSettings().with_environment({"HILBOT_MQTT_TLS_INSECURE": "maybe"})


@pytest.mark.parametrize(
    ("url", "host", "port", "tls", "user"),
    [
        ("mqtt://broker.lan", "broker.lan", 1883, False, None),
        ("mqtts://broker.lan", "broker.lan", 8883, True, None),
        ("mqtt://bob:s%40cret@10.0.0.2:1884", "10.0.0.2", 1884, False, "bob"),
        ("127.0.0.1:2000", "127.0.0.1", 2000, False, None),
    ],
)
def test_broker_urls(url, host, port, tls, user):
    parsed = parse_broker_url(url)
    assert (parsed.host, parsed.port, parsed.tls, parsed.username) == (host, port, tls, user)
    assert "cret" not in str(parsed)


@pytest.mark.parametrize("url", ["http://x", "mqtt://", "mqtt://x:99999", "mqtt://x/topic"])
def test_bad_broker_urls_say_what_is_wrong(url):
    with pytest.raises(BrokerUrlError) as info:
        parse_broker_url(url)
    assert info.value.url == url and "expected mqtt://" in str(info.value)


def test_backoff_doubles_with_jitter_and_resets():
    backoff = Backoff(0.1, 1.0, random.Random(3))
    delays = [backoff.next_delay() for _ in range(8)]
    nominal = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    assert all(n / 2 <= d <= n for d, n in zip(delays, nominal, strict=True))
    assert len(set(delays)) == len(delays)  # jittered
    backoff.reset()
    assert backoff.next_delay() <= 0.1


def message(topic, payload):
    return Message(topic, payload, qos=0, retain=False, mid=0, properties=None)


def test_the_inbox_hands_on_every_message_at_once_and_queues_none():
    topics = Topics("hilbot/omx")
    seen = []
    queue = dispatching_queue(lambda *args: seen.append(args))()
    queue.put_nowait(message(topics.target("arm"), b"1"))
    queue.put_nowait(message(topics.target("arm"), bytearray(b"2")))
    queue.put_nowait(message(topics.cmd, "3"))
    queue.put_nowait(message(topics.joints, None))
    assert seen == [
        (topics.target("arm"), b"1", False),
        (topics.target("arm"), b"2", False),
        (topics.cmd, b"3", False),
        (topics.joints, b"", False),
    ]
    assert queue.empty()


@pytest.mark.parametrize("pattern", [Pattern.CIRCLE, Pattern.FIGURE8])
def test_patterns_start_at_the_present_position_and_stay_in_their_plane(pattern):
    np.testing.assert_allclose(pattern_offset(pattern, 0.0, 0.05), 0.0, atol=1e-12)
    phases = np.linspace(0, 2 * math.pi, 50)
    points = np.array([pattern_offset(pattern, p, 0.05, Plane.XZ) for p in phases])
    assert np.all(points[:, 1] == 0.0)
    assert np.max(np.linalg.norm(points, axis=1)) <= 0.1 + 1e-12
    np.testing.assert_allclose(points[0], points[-1], atol=1e-12)  # closed


def test_jog_keys():
    np.testing.assert_allclose(jog_step("r", 0.01), [0, 0, 0.01])
    assert jog_step("?", 0.01) is None
    with pytest.raises(ValueError, match="keyboard"):
        pattern_offset(Pattern.JOG, 0.0, 0.01)


def test_exported_names_exist():
    import hilbot.driver.teleop as teleop

    assert all(hasattr(teleop, name) for name in teleop.__all__)
    assert callable(teleop.serve)
