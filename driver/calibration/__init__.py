"""Calibration: the guided ``hilbot calibrate`` flow, its files, and applying them at run time.

Modules: ``settings`` (the config's ``calibration`` section), ``flow`` (the measurement),
``guides`` (terminal prompts and the scripted-hand demo), ``files`` (where calibrations
live), ``apply`` (calibrated configs and the stale-calibration check),
``access`` (the register access both families share), ``dynamixel_access`` and
``feetech_access`` (the family seams on Dynamixel and Feetech buses).
"""
