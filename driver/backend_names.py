"""The names ``--backend`` takes, and the old name kept for scripts written before Feetech.

``hardware`` is the robot's real buses, each driven by its family's backend (Dynamixel or
Feetech, as ``buses[].family`` says). It was called ``dynamixel`` while Dynamixel was the
only family; that name is still accepted everywhere ``--backend`` is, and means the same.

A module of its own, light to import: the command-line parsers use it before any backend
is loaded.
"""

from __future__ import annotations

from typing import Final

#: The real buses of the config (Dynamixel and/or Feetech).
HARDWARE: Final = "hardware"

#: Old names, still accepted: old name -> name.
ALIASES: Final = {"dynamixel": HARDWARE}


def backend_name(name: str) -> str:
    """``name`` with an old name replaced by today's (argparse ``type=`` of ``--backend``)."""
    return ALIASES.get(name, name)


def hardware_help(what: str = "the real buses of the config") -> str:
    """The help text of the ``hardware`` choice, naming its old name."""
    return (
        f"hardware: {what}, each driven as its family says (buses[].family: Dynamixel "
        "or Feetech; `dynamixel` is its old name, still accepted)"
    )


__all__ = ["ALIASES", "HARDWARE", "backend_name", "hardware_help"]
