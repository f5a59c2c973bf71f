"""hilbot lead tells when the follower rejects what it sends: once as it starts, counted at the end.

A leader config whose wrist maps 1500 rad away publishes targets the follower's parser
refuses (``positions.wrist_flex must be <= 1000.0``); before, the lead said only
"published N targets" and exited 0. The follower is a real ``hilbot run --backend
virtual`` process with its embedded broker, the leader a real ``hilbot lead`` on a
virtual bus moved by the scripted hand; and the follower run in ``hilbot lead`` itself.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import pytest
import yaml

from hilbot.configs import config_path
from hilbot.driver.teleop.publisher import TeleopPublisher

WAIT = 300.0  # [s] start-up imports and virtual buses on a busy machine
FOLLOWER = "koch_v1_1_follower"
SUMMARY = re.compile(r"published (\d+) targets \(\d+/s\), (\d+) rejected by the follower: (.*)")
DETAIL = re.compile(r"positions\.wrist_flex must be <= 1000\.0, got 1\d{3}(\.\d+)?")
WARNING = "hilbot lead: the follower rejects the leader's targets (invalid): "


def _environment(home: Path) -> dict[str, str]:
    # A config folder of its own: a calibration file left in the user's would apply.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HILBOT_MQTT_")}
    environment["XDG_CONFIG_HOME"] = str(home)
    return environment


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("config-home")


@pytest.fixture(scope="module")
def bad_leader(home: Path) -> Path:
    """The Koch leader with its wrist mapped 1500 rad beyond anything the follower takes."""
    path = config_path("koch_v1_1_leader")
    data = yaml.safe_load(path.read_text())
    data["urdf"] = str(path.parent / data["urdf"])
    data["lead"]["joints"]["wrist_flex"] = {"offset": 1500.0}
    out = home / "leader_far.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _armed(publisher: TeleopPublisher) -> bool:
    return publisher.state is not None and publisher.state["mode"] == "armed"


async def _serving(url: str, run: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if run.poll() is not None:
            pytest.fail(f"hilbot run ended ({run.returncode}): {run.communicate()[1]}")
        try:
            async with TeleopPublisher(url, f"hilbot/{FOLLOWER}") as publisher:
                await publisher.wait_until(_armed, timeout=60.0)
                return
        except (aiomqtt.MqttError, OSError, TimeoutError):  # not listening or armed yet
            await asyncio.sleep(0.2)
    pytest.fail(f"hilbot run did not serve an armed follower on {url} within {WAIT} s")


@pytest.fixture(scope="module")
def follower_url(home: Path) -> Iterator[str]:
    """A ``hilbot run`` of the follower on its virtual bus, armed, on its embedded broker."""
    port = _free_port()
    run = subprocess.Popen(
        [sys.executable, "-m", "hilbot", "run", FOLLOWER, "--backend", "virtual", "--enable",
         "--no-status", "--broker-port", str(port), "--duration", "600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=_environment(home),
    )  # fmt: skip
    url = f"mqtt://127.0.0.1:{port}"
    try:
        asyncio.run(_serving(url, run))
        yield url
    finally:
        run.terminate()
        run.communicate(timeout=WAIT)


def _lead(home: Path, leader: Path | str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hilbot", "lead", str(leader), "--backend", "virtual", "--demo",
         "wave", "--duration", "3", "--no-status", *options],
        capture_output=True, text=True, timeout=WAIT, stdin=subprocess.DEVNULL,
        env=_environment(home),
    )  # fmt: skip


def _check_rejected(done: subprocess.CompletedProcess[str]) -> re.Match[str]:
    assert "Traceback" not in done.stderr, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith(WARNING)]
    assert len(warnings) == 1, done.stderr  # once, on the first rejection
    assert DETAIL.fullmatch(warnings[0][len(WARNING) :]), warnings[0]
    summary = SUMMARY.search(done.stdout)
    assert summary is not None, done.stdout
    published, rejected = int(summary[1]), int(summary[2])
    assert published > 50, done.stdout
    # Every target that reached the follower was rejected; the embedded broker may
    # conflate some on a busy machine (QoS 0: the newest per topic counts).
    assert 0 < rejected <= published, done.stdout
    assert DETAIL.match(summary[3]), done.stdout
    return summary


async def _rejected_total(url: str) -> int:
    """The follower's count of rejected messages, from a ``state`` sent after this call."""
    async with TeleopPublisher(url, f"hilbot/{FOLLOWER}") as publisher:
        states: list[object] = []

        def fresh(p: TeleopPublisher) -> bool:
            if p.state is not None and (not states or p.state is not states[-1]):
                states.append(p.state)
            return len(states) >= 3  # the first may predate the call; rest a moment besides

        await publisher.wait_until(fresh, timeout=60.0)
        assert publisher.state is not None
        return int(publisher.state["teleop"]["rejected_total"])


async def test_lead_over_a_broker_reports_the_followers_rejections(
    home: Path, bad_leader: Path, follower_url: str
) -> None:
    before = await _rejected_total(follower_url)
    done = await asyncio.to_thread(
        _lead, home, bad_leader, "--to", FOLLOWER, "--mqtt", follower_url
    )
    assert done.returncode == 0, done.stderr
    summary = _check_rejected(done)
    # The count is the follower's own counter, not the error topic's 50 a second. lead
    # reads it once the counter has rested; on a loaded machine a last target or two
    # can be counted after that read (590 of 591 was seen with CPU hogs).
    actual = await _rejected_total(follower_url) - before
    assert 0.95 * actual <= int(summary[2]) <= actual, done.stdout


def test_a_good_leader_after_a_bad_one_sees_no_rejection(
    home: Path, bad_leader: Path, follower_url: str
) -> None:
    # The follower's counter already holds the other leader's rejections: none are this one's.
    # (The test above leaves some on this module's follower; a bad lead here when it did not.)
    if asyncio.run(_rejected_total(follower_url)) == 0:
        _lead(home, bad_leader, "--to", FOLLOWER, "--mqtt", follower_url)
    assert asyncio.run(_rejected_total(follower_url)) > 0
    done = _lead(home, "koch_v1_1_leader", "--mqtt", follower_url)
    assert done.returncode == 0, done.stderr
    assert "rejected" not in done.stdout and "rejects" not in done.stderr, done
    assert re.search(r"published \d+ targets \(\d+/s\)$", done.stdout.strip()), done.stdout


def test_lead_with_its_own_follower_reports_the_rejections(home: Path, bad_leader: Path) -> None:
    done = _lead(home, bad_leader)
    assert done.returncode == 0, done.stderr
    summary = _check_rejected(done)
    assert "; follower armed" in summary[3], done.stdout
