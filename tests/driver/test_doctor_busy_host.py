"""hilbot doctor on a busy host: a late reply is the host's lateness, not a servo's fault.

Two CPU-bound processes beside the doctor and the virtual bus (a 2-core machine) make
replies late by several milliseconds; the doctor must not blame a servo register for it
("Status Return Level probably 0", "rx corrupt") and must name --margin-ms instead.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from hilbot.driver.cli import main
from hilbot.sim import running_virtual_bus

SERVOS = {i: "XM430-W350" for i in range(1, 6)}


@pytest.fixture
def two_hogs() -> Iterator[None]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _doctor(port: str, servos: dict[int, str], *extra: str) -> list[str]:
    args = ["doctor", "--port", port, *extra]
    for i, model in servos.items():
        args += ["--servo", f"{i}:{model}"]
    return args


def test_doctor_under_two_cpu_hogs_blames_no_servo(two_hogs, capsys):
    with running_virtual_bus(SERVOS, return_delay_time=0) as vbus:
        for _ in range(3):
            assert main(_doctor(vbus.port, SERVOS)) == 0
            out = capsys.readouterr().out
            assert "[error]" not in out
            assert "Status Return Level" not in out and "rx " not in out
            assert out.count("[   ok] servo") == 2 * 5  # limits, model and firmware of each
            host = [line for line in out.splitlines() if line.startswith("[") and "host:" in line]
            assert len(host) == 1
            if "[ warn]" in host[0]:
                assert "--margin-ms" in host[0]


def test_doctor_of_a_feetech_bus_under_two_cpu_hogs_blames_no_servo(two_hogs, capsys):
    from hilbot.sim.virtual_bus import FeetechVirtualBus

    servos = {i: "STS3215" for i in range(1, 6)}
    with FeetechVirtualBus(servos, 1_000_000, return_delay_time=0) as bus:
        for _ in range(3):
            assert main(_doctor(bus.port, servos, "--family", "feetech")) == 0
            out = capsys.readouterr().out
            assert "[error]" not in out and "does not answer" not in out
            assert out.count("[   ok] servo") == 3 * 5  # return delay, limits, torque of each


def test_a_missing_servo_is_still_blamed_under_load(two_hogs, capsys):
    with running_virtual_bus(SERVOS, return_delay_time=0) as vbus:
        assert main(_doctor(vbus.port, {**SERVOS, 6: "XM430-W350"})) == 1
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if line.startswith("[error]")]
    assert errors == [errors[0]] and errors[0].startswith("[error] servo 6 (servo6)")
    host = [line for line in out.splitlines() if line.startswith("[") and "host:" in line]
    assert len(host) == 1 and "servo 6" not in host[0]


def test_a_late_servo_on_a_punctual_host_is_named_with_its_causes(capsys):
    with running_virtual_bus(SERVOS, return_delay_time=0) as vbus:
        vbus.faults(3).delay = 0.09  # servo 3 answers 90 ms late, within the patient 120 ms
        # a 60 ms margin: the host counts as on time unless it stalls 30 ms (half of it)
        assert main(_doctor(vbus.port, SERVOS, "--margin-ms", "60")) == 0
    out = capsys.readouterr().out
    assert "[error]" not in out, out
    late = [line for line in out.splitlines() if line.startswith("[ warn] servo 3")]
    assert len(late) == 1, out
    (late,) = late
    assert "though this host was on time" in late and "latency timer" in late
    assert "Return Delay Time" in late
