"""The lease and the instance precedence, sans I/O: a clock of our own, no broker."""

import json

import pytest

from hilbot.driver.teleop.bridge import Instance, Lease, new_instance_id, read_status


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_first_sender_takes_the_lease_and_keeps_it_while_it_speaks():
    clock = Clock()
    lease = Lease(0.5, clock)
    assert lease.holder is None
    assert lease.admit("alice") and lease.holder == "alice"
    clock.now += 0.4
    assert not lease.admit("bob")
    assert lease.admit("alice")  # renewed
    clock.now += 0.4
    assert not lease.admit("bob")  # 0.8 s after alice took it, 0.4 s after she spoke
    clock.now += 0.11
    assert lease.holder is None  # silent for longer than the timeout
    assert lease.admit("bob") and lease.holder == "bob"
    assert not lease.end("alice") and lease.holder == "bob"
    assert lease.end("bob") and lease.holder is None
    lease.admit("bob")
    assert lease.refusal("alice").startswith("the robot is leased to sender 'bob', not 'alice'")


def test_a_lease_timeout_must_be_positive():
    with pytest.raises(ValueError, match="must be > 0"):
        Lease(0.0)


def test_instance_ids_are_random_and_precedence_is_takeover_then_later_start():
    assert len({new_instance_id() for _ in range(100)}) == 100
    old = Instance("a" * 16, started=10.0)
    new = Instance("b" * 16, started=20.0)
    taker = Instance("c" * 16, started=5.0, takeover=True)  # a clock behind the others

    def seen(instance):
        return read_status(json.dumps({"online": True, **instance.fields()}).encode())

    assert new.outranks(seen(old)) and not old.outranks(seen(new))
    assert taker.outranks(seen(new)) and not new.outranks(seen(taker))
    status = seen(taker)
    assert status is not None and status.instance == taker.id and status.takeover


@pytest.mark.parametrize("payload", [b"", b"not json", b"[]", b'{"online": "yes"}'])
def test_an_unreadable_status_is_none(payload):
    assert read_status(payload) is None
