"""Feetech memory-table item names, as the Feetech memory tables write them."""

from __future__ import annotations

import enum


class FeetechRegister(enum.Enum):
    """Memory-table items of the STS and SCS series."""

    FIRMWARE_MAJOR_VERSION = "Firmware Major Version"
    FIRMWARE_MINOR_VERSION = "Firmware Minor Version"
    END = "END"  # byte order of the table: 0 little-endian (STS), 1 big-endian (SCS)
    MODEL_NUMBER = "Model Number"  # "Servo Major/Minor Version", addresses 3 and 4
    ID = "ID"
    BAUD_RATE = "Baud Rate"
    RETURN_DELAY_TIME = "Return Delay Time"
    RESPONSE_STATUS_LEVEL = "Response Status Level"
    MIN_ANGLE_LIMIT = "Min Angle Limit"
    MAX_ANGLE_LIMIT = "Max Angle Limit"
    MAX_TEMPERATURE_LIMIT = "Max Temperature Limit"
    MAX_INPUT_VOLTAGE = "Max Input Voltage"
    MIN_INPUT_VOLTAGE = "Min Input Voltage"
    MAX_TORQUE = "Max Torque"
    PHASE = "Phase"
    UNLOADING_CONDITION = "Unloading Condition"
    LED_ALARM_CONDITION = "LED Alarm Condition"
    P_COEFFICIENT = "P Coefficient"
    D_COEFFICIENT = "D Coefficient"
    I_COEFFICIENT = "I Coefficient"
    MINIMUM_STARTUP_FORCE = "Minimum Startup Force"
    CW_DEAD_ZONE = "CW Dead Zone"
    CCW_DEAD_ZONE = "CCW Dead Zone"
    PROTECTION_CURRENT = "Protection Current"
    ANGULAR_RESOLUTION = "Angular Resolution"
    HOMING_OFFSET = "Homing Offset"  # the table's "Position Correction" / "Ofs"
    OPERATING_MODE = "Operating Mode"
    PROTECTIVE_TORQUE = "Protective Torque"
    PROTECTION_TIME = "Protection Time"
    OVERLOAD_TORQUE = "Overload Torque"
    SPEED_P_COEFFICIENT = "Speed Closed Loop P Coefficient"
    OVER_CURRENT_PROTECTION_TIME = "Over Current Protection Time"
    SPEED_I_COEFFICIENT = "Speed Closed Loop I Coefficient"
    TORQUE_ENABLE = "Torque Enable"  # the table's "Torque Switch"
    ACCELERATION = "Acceleration"
    GOAL_POSITION = "Goal Position"
    GOAL_TIME = "Goal Time"  # "Running Time"; PWM duty in mode 2
    GOAL_SPEED = "Goal Speed"  # "Running Speed"
    TORQUE_LIMIT = "Torque Limit"
    LOCK = "Lock"
    PRESENT_POSITION = "Present Position"
    PRESENT_SPEED = "Present Speed"
    PRESENT_LOAD = "Present Load"
    PRESENT_VOLTAGE = "Present Voltage"
    PRESENT_TEMPERATURE = "Present Temperature"
    ASYNC_WRITE_FLAG = "Async Write Flag"  # set by REG WRITE until ACTION
    STATUS = "Status"
    MOVING = "Moving"
    PRESENT_CURRENT = "Present Current"
    # The factory block (STS, 80 ~ 86; "出厂参数" in the memory table).
    MOVING_SPEED_THRESHOLD = "Moving Speed Threshold"  # LeRobot: Moving_Velocity_Threshold
    DTS = "DTs"  # [ms]
    SPEED_UNIT_FACTOR = "Speed Unit Factor"  # LeRobot: Velocity_Unit_factor
    MIN_SPEED_LIMIT = "Min Speed Limit"  # LeRobot: Hts (ns)
    MAX_SPEED_LIMIT = "Max Speed Limit"  # LeRobot: Maximum_Velocity_Limit
    ACCELERATION_LIMIT = "Acceleration Limit"  # LeRobot: Maximum_Acceleration
    ACCELERATION_MULTIPLIER = "Acceleration Multiplier"
