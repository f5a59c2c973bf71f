"""Feetech memory tables pinned against the tables written from the sources."""

import pytest

import hilbot.hal.feetech as feetech
from hilbot.hal.feetech import tables as t
from hilbot.hal.feetech.tables import WordOrder
from hilbot.hal.registers import Access, Area, Encoding

N = t.FeetechRegister

# STS memory table (STS3215 column): address, size, access, area, default.
STS3215 = {
    N.FIRMWARE_MAJOR_VERSION: (0, 1, "R", "EEPROM", 3),
    N.FIRMWARE_MINOR_VERSION: (1, 1, "R", "EEPROM", 6),
    N.MODEL_NUMBER: (3, 2, "R", "EEPROM", 777),
    N.ID: (5, 1, "RW", "EEPROM", 1),
    N.BAUD_RATE: (6, 1, "RW", "EEPROM", 0),
    N.RETURN_DELAY_TIME: (7, 1, "RW", "EEPROM", 0),
    N.RESPONSE_STATUS_LEVEL: (8, 1, "RW", "EEPROM", 1),
    N.MIN_ANGLE_LIMIT: (9, 2, "RW", "EEPROM", 0),
    N.MAX_ANGLE_LIMIT: (11, 2, "RW", "EEPROM", 4095),
    N.MAX_TEMPERATURE_LIMIT: (13, 1, "RW", "EEPROM", 70),
    N.MAX_INPUT_VOLTAGE: (14, 1, "RW", "EEPROM", 80),
    N.MIN_INPUT_VOLTAGE: (15, 1, "RW", "EEPROM", 40),
    N.MAX_TORQUE: (16, 2, "RW", "EEPROM", 1000),
    N.PHASE: (18, 1, "RW", "EEPROM", 12),
    N.UNLOADING_CONDITION: (19, 1, "RW", "EEPROM", 44),
    N.LED_ALARM_CONDITION: (20, 1, "RW", "EEPROM", 47),
    N.P_COEFFICIENT: (21, 1, "RW", "EEPROM", 32),
    N.D_COEFFICIENT: (22, 1, "RW", "EEPROM", 32),
    N.I_COEFFICIENT: (23, 1, "RW", "EEPROM", 0),
    N.MINIMUM_STARTUP_FORCE: (24, 2, "RW", "EEPROM", 16),
    N.CW_DEAD_ZONE: (26, 1, "RW", "EEPROM", 1),
    N.CCW_DEAD_ZONE: (27, 1, "RW", "EEPROM", 1),
    N.PROTECTION_CURRENT: (28, 2, "RW", "EEPROM", 500),
    N.ANGULAR_RESOLUTION: (30, 1, "RW", "EEPROM", 1),
    N.HOMING_OFFSET: (31, 2, "RW", "EEPROM", 0),
    N.OPERATING_MODE: (33, 1, "RW", "EEPROM", 0),
    N.PROTECTIVE_TORQUE: (34, 1, "RW", "EEPROM", 20),
    N.PROTECTION_TIME: (35, 1, "RW", "EEPROM", 200),
    N.OVERLOAD_TORQUE: (36, 1, "RW", "EEPROM", 80),
    N.SPEED_P_COEFFICIENT: (37, 1, "RW", "EEPROM", 10),
    N.OVER_CURRENT_PROTECTION_TIME: (38, 1, "RW", "EEPROM", 200),
    N.SPEED_I_COEFFICIENT: (39, 1, "RW", "EEPROM", 10),
    N.TORQUE_ENABLE: (40, 1, "RW", "RAM", 0),
    N.ACCELERATION: (41, 1, "RW", "RAM", 0),
    N.GOAL_POSITION: (42, 2, "RW", "RAM", 0),
    N.GOAL_TIME: (44, 2, "RW", "RAM", 0),
    N.GOAL_SPEED: (46, 2, "RW", "RAM", 0),
    N.TORQUE_LIMIT: (48, 2, "RW", "RAM", 1000),
    N.LOCK: (55, 1, "RW", "RAM", 0),
    N.PRESENT_POSITION: (56, 2, "R", "RAM", 0),
    N.PRESENT_SPEED: (58, 2, "R", "RAM", 0),
    N.PRESENT_LOAD: (60, 2, "R", "RAM", 0),
    N.PRESENT_VOLTAGE: (62, 1, "R", "RAM", 0),
    N.PRESENT_TEMPERATURE: (63, 1, "R", "RAM", 0),
    N.ASYNC_WRITE_FLAG: (64, 1, "R", "RAM", 0),
    N.STATUS: (65, 1, "R", "RAM", 0),
    N.MOVING: (66, 1, "R", "RAM", 0),
    N.PRESENT_CURRENT: (69, 2, "R", "RAM", 0),
    # The factory block: named by the table, its values not given (``unsourced``).
    N.MOVING_SPEED_THRESHOLD: (80, 1, "RW", "EEPROM", 0),
    N.DTS: (81, 1, "RW", "EEPROM", 0),
    N.SPEED_UNIT_FACTOR: (82, 1, "RW", "EEPROM", 0),
    N.MIN_SPEED_LIMIT: (83, 1, "RW", "EEPROM", 0),
    N.MAX_SPEED_LIMIT: (84, 1, "RW", "EEPROM", 0),
    N.ACCELERATION_LIMIT: (85, 1, "RW", "EEPROM", 0),
    N.ACCELERATION_MULTIPLIER: (86, 1, "RW", "EEPROM", 0),
}

# LeRobot's STS_SMS_SERIES_CONTROL_TABLE and SCS_SERIES_CONTROL_TABLE: (address, size).
LEROBOT_STS = {
    N.ID: (5, 1), N.MIN_ANGLE_LIMIT: (9, 2), N.MAX_ANGLE_LIMIT: (11, 2),
    N.MAX_TORQUE: (16, 2), N.PROTECTION_CURRENT: (28, 2), N.HOMING_OFFSET: (31, 2),
    N.OPERATING_MODE: (33, 1), N.TORQUE_ENABLE: (40, 1), N.GOAL_POSITION: (42, 2),
    N.GOAL_TIME: (44, 2), N.GOAL_SPEED: (46, 2), N.TORQUE_LIMIT: (48, 2), N.LOCK: (55, 1),
    N.PRESENT_POSITION: (56, 2), N.PRESENT_SPEED: (58, 2), N.PRESENT_LOAD: (60, 2),
    N.STATUS: (65, 1), N.MOVING: (66, 1), N.PRESENT_CURRENT: (69, 2),
    # "Moving_Velocity_Threshold", "DTs", "Velocity_Unit_factor", "Hts",
    # "Maximum_Velocity_Limit", "Maximum_Acceleration", "Acceleration_Multiplier "
    N.MOVING_SPEED_THRESHOLD: (80, 1), N.DTS: (81, 1), N.SPEED_UNIT_FACTOR: (82, 1),
    N.MIN_SPEED_LIMIT: (83, 1), N.MAX_SPEED_LIMIT: (84, 1), N.ACCELERATION_LIMIT: (85, 1),
    N.ACCELERATION_MULTIPLIER: (86, 1),
}  # fmt: skip
LEROBOT_SCS = {
    N.PROTECTIVE_TORQUE: (37, 1), N.PROTECTION_TIME: (38, 1), N.TORQUE_ENABLE: (40, 1),
    N.GOAL_POSITION: (42, 2), N.GOAL_TIME: (44, 2), N.GOAL_SPEED: (46, 2), N.LOCK: (48, 1),
    N.PRESENT_POSITION: (56, 2), N.PRESENT_LOAD: (60, 2), N.MOVING: (66, 1),
}  # fmt: skip


def test_sts3215_matches_the_memory_table() -> None:
    spec = t.model("STS3215")
    got = {
        name: (r.address, r.size, r.access.value, r.area.value, r.default)
        for name, r in spec.table.items()
        if name is not N.END
    }
    assert got == STS3215


@pytest.mark.parametrize("name", ["STS3215", "STS3215-12V", "STS3250"])
def test_sts_layout_is_lerobots(name: str) -> None:
    table = t.model(name).table
    assert {n: (table[n].address, table[n].size) for n in LEROBOT_STS} == LEROBOT_STS


def test_scs_layout_is_lerobots_and_big_endian() -> None:
    spec = t.model("SCS0009")
    assert {n: (spec.table[n].address, spec.table[n].size) for n in LEROBOT_SCS} == LEROBOT_SCS
    assert spec.word_order is WordOrder.BIG
    assert all(r.byte_order == "big" for r in spec.table.values() if r.size == 2)
    assert spec.table[N.MODEL_NUMBER].encode(1284) == b"\x05\x04"
    assert spec.lock_register.address == 48


def test_model_numbers_are_lerobots() -> None:
    # LeRobot MODEL_NUMBER_TABLE: sts3215 777, sts3250 2825, scs0009 1284.
    assert {m.name: m.model_number for m in t.MODELS.values()} == {
        "STS3215": 777, "STS3215-12V": 777, "STS3250": 2825, "SCS0009": 1284,
    }  # fmt: skip
    assert {m.name for m in t.models_with_number(777)} == {"STS3215", "STS3215-12V"}
    # Servo Major/Minor Version 9.3 at addresses 3, 4 is model number 777, little-endian.
    assert t.model("STS3215").table[N.MODEL_NUMBER].encode(777) == bytes((9, 3))


def test_sign_magnitude_registers_are_lerobots_and_rustypots() -> None:
    table = t.model("STS3215").table
    # LeRobot STS_SMS_SERIES_ENCODINGS_TABLE: Homing_Offset 11, Goal/Present_Velocity 15.
    assert table[N.HOMING_OFFSET].encoding is Encoding.SIGN_MAGNITUDE_11
    assert table[N.GOAL_SPEED].encoding is Encoding.SIGN_MAGNITUDE_15
    assert table[N.PRESENT_SPEED].encoding is Encoding.SIGN_MAGNITUDE_15
    assert table[N.PRESENT_LOAD].encoding is Encoding.SIGN_MAGNITUDE_10
    # rustypot Offset::to_raw(-pi) == 4095: bit 11 set, magnitude 2047.
    assert table[N.HOMING_OFFSET].encode(-2047) == (4095).to_bytes(2, "little")
    assert table[N.HOMING_OFFSET].decode((3071).to_bytes(2, "little")) == -1023


def test_goal_position_range_follows_the_angle_limits_in_position_mode() -> None:
    reg = t.model("STS3215").table[N.GOAL_POSITION]
    values = {N.MIN_ANGLE_LIMIT: 100, N.MAX_ANGLE_LIMIT: 3000}
    assert reg.limit_range(t.POSITION_MODE, values.__getitem__) == (100, 3000)
    assert reg.limit_range(t.SPEED_MODE, values.__getitem__) is None


def test_baud_rates_and_refusal() -> None:
    spec = t.model("sts3215")
    assert spec.baud_value(1_000_000) == 0
    assert spec.baud_value(76_800) == 5
    with pytest.raises(ValueError, match="cannot use 9600"):
        spec.baud_value(9600)


def test_unknown_model_and_register_say_what_exists() -> None:
    with pytest.raises(KeyError, match="STS3215"):
        t.model("XM430")
    with pytest.raises(KeyError, match="SCS0009 has no Protection Current"):
        t.model("SCS0009").register(N.PROTECTION_CURRENT)


def test_every_model_names_its_source_and_areas() -> None:
    for spec in t.MODELS.values():
        assert "Feetech" in spec.source
        for reg in spec.table.values():
            # EEPROM below 40, RAM from 40; the factory block (80 ~ 86) is saved like EEPROM.
            assert reg.area is (Area.EEPROM if reg.address < 40 or reg.address >= 80 else Area.RAM)
            if 56 <= reg.address < 80:  # the feedback block
                assert reg.access is Access.R


def test_exports_exist() -> None:
    for name in feetech.__all__:
        assert hasattr(feetech, name), name
