"""``hilbot sim-bus --log-positions``: each goal write and position read, timed, bus side."""

from __future__ import annotations

from pathlib import Path

import pytest
import scservo_sdk as scs
from scservo_sdk import port_handler

from tests.driver.test_sim_bus_eeprom import FEETECH, sim_bus


@pytest.fixture(autouse=True)
def _patient_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(port_handler, "LATENCY_TIMER", 100)


def test_goal_writes_and_position_reads_are_logged_with_every_servo(tmp_path: Path) -> None:
    log = tmp_path / "positions.txt"
    with sim_bus(*FEETECH, "--no-persist", "--log-positions", str(log)) as (port, _):
        handler = scs.PortHandler(port)
        assert handler.openPort() and handler.setBaudRate(1_000_000)
        packets = scs.PacketHandler(0)
        for goals in ((1000, 3000), (1000, 3000), (1100, 2900)):
            group = scs.GroupSyncWrite(handler, packets, 42, 2)
            for servo, goal in enumerate(goals, 1):
                assert group.addParam(servo, [goal & 0xFF, goal >> 8])
            assert group.txPacket() == scs.COMM_SUCCESS
        # Another register's write (Acceleration, 41) is no goal write.
        assert packets.write1ByteTxRx(handler, 1, 41, 20)[1] == scs.COMM_SUCCESS
        present, result, _ = packets.read2ByteTxRx(handler, 2, 56)
        assert result == scs.COMM_SUCCESS
        handler.closePort()
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [line[0] for line in lines] == ["goal", "goal", "goal", "read"]
    assert [line[2:] for line in lines[:3]] == [
        ["1000", "3000"],
        ["1000", "3000"],
        ["1100", "2900"],
    ]
    assert int(lines[3][3]) == present
    # Servo 1 was not read, yet the line has its position now (it sits near mid-range).
    assert 1000 < int(lines[3][2]) < 3100
    times = [float(line[1]) for line in lines]
    assert times == sorted(times)


def test_log_positions_needs_a_feetech_bus(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "hilbot", "sim-bus", "--servo", "1:XL430-W250", "--no-persist",
         "--log-positions", str(tmp_path / "log.txt"), "--duration", "5"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "hilbot sim-bus: --log-positions: only a Feetech bus tells goal writes and reads apart"
    )
