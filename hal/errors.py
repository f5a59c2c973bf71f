"""Errors of the hardware layer.

Every error carries data, so callers and tests check fields, not messages::

    HalError
    ├── ConfigError            a servo/joint mapping that cannot work (bad id, model, range)
    ├── BusError (ConnectionError)
    │   ├── PortError          the serial port cannot be opened or used
    │   └── CommError          a transaction failed: servo_id, instruction, result
    │       ├── TimeoutError_  no (complete) status packet within the deadline
    │       └── CrcError       a status packet arrived corrupt
    ├── ServoError             the servo answered with error bits: servo_id, flags
    │   └── HardwareFault      the hardware-error status is set (overload, overheating, ...)
    ├── StartupError           start-up checks failed (missing servo, wrong model, mode)
    └── CommandError (ValueError)  a command outside what the hardware may be sent
"""

from __future__ import annotations


class HalError(Exception):
    """Root of every error raised by ``hilbot.hal``."""
