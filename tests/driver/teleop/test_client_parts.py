"""The pure parts of the connection: broker URLs and the reconnect backoff."""

import random

import pytest

from hilbot.driver.teleop import BrokerUrlError, parse_broker_url
from hilbot.driver.teleop.client import Backoff


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
