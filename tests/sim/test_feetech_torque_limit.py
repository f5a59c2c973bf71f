"""The virtual Feetech firmware honours Torque Limit: the load and the push stall at it.

Drives the bus's instruction handler with encoded packets on a manual clock (no pty),
as ``test_feetech_firmware.py`` does, so the dynamics step exactly as long as asked.
"""

from __future__ import annotations

import pytest

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.feetech import protocol as p
from hilbot.hal.feetech.tables import FeetechRegister as N
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.hand import Hand
from hilbot.sim.virtual_bus import FeetechVirtualBus

OBJECT = 0.3  # [rad] where an obstacle blocks the shaft
STEP = 2 * 3.141592653589793 / 4096  # [rad] per position step


class Host:
    """Sends instruction packets to a (not started) bus's handler on a manual clock."""

    def __init__(self) -> None:
        self.clock = 100.0
        self.bus = FeetechVirtualBus(
            [(1, "STS3215"), (2, "STS3215")], clock=lambda: self.clock, wire_timing=False
        )

    def send(self, packet: p.InstructionPacket) -> list[p.StatusPacket]:
        (item,) = p.PacketDecoder(p.PacketKind.INSTRUCTION).feed(p.encode_instruction(packet))
        assert not isinstance(item, p.StatusPacket)
        with self.bus.lock:
            replies = self.bus.handler.handle(item, self.bus._advance())
        out = p.PacketDecoder(p.PacketKind.STATUS).feed(b"".join(r.data for r in replies))
        assert all(isinstance(x, p.StatusPacket) for x in out), out
        return out  # type: ignore[return-value]

    def read(self, servo_id: int, name: N) -> int:
        reg = self.bus.servo(servo_id).spec.table[name]
        (reply,) = self.send(p.read(servo_id, reg.address, reg.size))
        return reg.decode(reply.params)

    def write(self, servo_id: int, name: N, value: int) -> None:
        reg = self.bus.servo(servo_id).spec.table[name]
        self.send(p.write(servo_id, reg.address, reg.encode(value)))

    def wait(self, seconds: float) -> None:
        self.clock += seconds

    def cap(self, servo_id: int) -> float:
        """The model's torque cap as a share of the stall torque."""
        index = self.bus.servo(servo_id).index
        stall = self.bus.model.physics[index].stall_torque
        return float(self.bus.model.torque_limit[index]) / stall


@pytest.fixture
def host() -> Host:
    return Host()


def test_a_goal_beyond_an_obstacle_stalls_at_the_torque_limit(host: Host) -> None:
    host.write(1, N.TORQUE_LIMIT, 300)  # 30 %; servo 2 keeps its power-up 1000
    for servo_id in (1, 2):
        host.bus.model.set_obstacle(host.bus.servo(servo_id).index, high=OBJECT)
        host.write(servo_id, N.TORQUE_ENABLE, 1)
        host.write(servo_id, N.GOAL_POSITION, 2048 + round(1.0 / STEP))  # past the object
    host.wait(1.0)
    # Present Load is the output's share of full scale: it saturates at Torque Limit.
    assert host.read(1, N.PRESENT_LOAD) == 300
    assert host.read(2, N.PRESENT_LOAD) == 1000  # stall: nothing caps it
    assert host.read(1, N.PRESENT_POSITION) == 2048 + round(OBJECT / STEP)
    host.wait(2.0)  # past the overload time (1.5 s) at stall
    assert host.read(1, N.TORQUE_ENABLE) == 1
    assert host.bus.servo(1).hardware_error == HardwareErrorFlags.NONE
    assert host.read(2, N.TORQUE_ENABLE) == 0  # overload: Unloading Condition cut torque


def test_a_lightly_held_servo_gives_way_to_the_hand_pushing_at_its_limit(host: Host) -> None:
    specs = [ServoSpec(1, "STS3215", "trigger"), ServoSpec(2, "STS3215", "elbow")]
    host.write(1, N.TORQUE_LIMIT, 100)  # 10 %: a light hold, which a finger overcomes
    for servo_id in (1, 2):
        host.write(servo_id, N.TORQUE_ENABLE, 1)
    hand = Hand(host.bus, specs)  # not started: placed by hand, tick by tick
    host.wait(0.01)
    for _ in range(20):  # the hand holds both 0.5 rad away from their goals for 0.2 s
        hand.place({"trigger": 0.5, "elbow": 0.5})
        host.wait(0.01)
        load = host.read(1, N.PRESENT_LOAD)
    assert load == -100  # pushing back towards its goal, with no more than its limit
    assert hand.joint_positions()["trigger"] == pytest.approx(0.5, abs=0.01)
    assert hand.joint_positions()["elbow"] == pytest.approx(0.0, abs=0.01)  # full torque


def test_power_up_loads_torque_limit_from_max_torque(host: Host) -> None:
    host.write(1, N.TORQUE_LIMIT, 300)
    assert host.cap(1) == pytest.approx(0.3)
    host.write(1, N.MAX_TORQUE, 400)  # EEPROM (Lock 0: saved); Torque Limit stays
    assert host.read(1, N.TORQUE_LIMIT) == 300
    assert host.cap(1) == pytest.approx(0.3)
    host.send(p.reboot(1))
    assert host.read(1, N.TORQUE_LIMIT) == 400
    assert host.cap(1) == pytest.approx(0.4)
    host.write(1, N.TORQUE_LIMIT, 250)
    host.bus.faults(1).unplug()  # a power cycle: RAM lost, Max Torque loaded again
    host.bus.faults(1).replug()
    assert host.read(1, N.TORQUE_LIMIT) == 400
    assert host.cap(1) == pytest.approx(0.4)
