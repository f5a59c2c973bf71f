"""The servo families hilbot drives, by the name a config gives (``buses[].family``).

A :class:`Family` is what the rest of hilbot asks about a bus's servos instead of
branching on the family's name: its models, what its start-up writes, whether its
servos have a Bus Watchdog, the backend and the bus checks. Each family's code is
imported only when asked for::

    from hilbot.hal.family import family

    fam = family("feetech")
    fam.model("STS3215")                   # the model's spec
    fam.describe(bus.protocol)             # "Feetech", or "protocol 2.0" for Dynamixel
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from hilbot.hal.mapping import BusSpec, ServoSpec

__all__ = ["FAMILIES", "Family", "family"]


def _attr(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True, slots=True)
class Family:
    """One servo family: what hilbot asks about its buses.

    Args:
        name: the config's name, ``"dynamixel"`` or ``"feetech"``.
        title: the name in messages, ``"Dynamixel"``.
        protocols: the protocol versions a bus of it speaks (``--protocol``); empty: one,
            with no option to choose it.
        has_bus_watchdog: some of its servos have a Bus Watchdog (``safety.bus_watchdog``).
        homing_sign: LeRobot's calibration: present = raw + sign * Homing_Offset.
        lerobot_written_direction: LeRobot reverses its servos' normalised values by
            their drive mode, so a dataset's range modes keep the config's direction.
        own_settings: ``ServoSpec`` fields only this family's start-up writes.
        settings_note: said after "is written to <title> servos at start-up".
        ignore_note: said after "a <title> servo would ignore it".
        models_path, model_path, rate_path, diagnose_path, backend_path: where its
            model table, model lookup, cycle-rate limit, bus check and backend live.
        backend_options: the ``dynamixel_backend`` options its backend takes (``None``:
            all of them, and the bus's read set as ``read``).
        check_path: where its check of a ``ServoSpec``'s settings lives (``""``: none).
    """

    name: str
    title: str
    protocols: tuple[int, ...]
    has_bus_watchdog: bool
    homing_sign: int
    lerobot_written_direction: bool
    own_settings: tuple[str, ...]
    settings_note: str
    ignore_note: str
    models_path: str
    model_path: str
    rate_path: str
    diagnose_path: str
    backend_path: str
    backend_options: tuple[str, ...] | None = None
    check_path: str = ""

    def describe(self, protocol: int) -> str:
        """How a bus of it is named in a status line: ``"Feetech"``, ``"protocol 2.0"``."""
        return f"protocol {protocol}.0" if self.protocols else self.title

    @property
    def models(self) -> Mapping[str, Any]:
        """Every model it supports, by name."""
        models: Mapping[str, Any] = _attr(self.models_path)
        return models

    def model(self, name: str) -> Any:
        """The spec of model ``name``; ``KeyError`` listing the supported ones."""
        return _attr(self.model_path)(name)

    def knows(self, name: str) -> bool:
        """Whether ``name`` is one of its models (case ignored)."""
        return name.strip().lower() in {m.lower() for m in self.models}

    def settings_given(self, servo: object) -> list[str]:
        """The :attr:`own_settings` ``servo`` gives (not ``None``), in that order."""
        return [name for name in self.own_settings if getattr(servo, name, None) is not None]

    def check_settings(self, spec: ServoSpec) -> None:
        """Refuse settings its start-up would ignore (``ConfigError`` naming the field)."""
        if self.check_path:
            _attr(self.check_path)(spec)

    def max_cycle_rate(
        self, bus: BusSpec, servos: Sequence[ServoSpec], read: str | None = None
    ) -> float:
        """The highest cycle rate [Hz] the bus carries for ``servos``."""
        rate: Callable[..., float] = _attr(self.rate_path)
        return rate(bus, servos, read=read) if self.protocols else rate(bus, servos)

    def diagnose(
        self, bus: BusSpec, servos: Sequence[ServoSpec], *, margin_ms: float = 3.0
    ) -> tuple[list[Any], str]:
        """``hilbot doctor``'s look at one bus: findings and the budget line."""
        result: tuple[list[Any], str] = _attr(self.diagnose_path)(bus, servos, margin_ms=margin_ms)
        return result

    def backend(
        self,
        bus: BusSpec,
        servos: Sequence[ServoSpec],
        *,
        read: str | None = None,
        joint_limits: Mapping[str, tuple[float, float]] | None = None,
        **options: Any,
    ) -> Any:
        """Its backend on ``bus``: the ``options`` it takes (see :attr:`backend_options`)."""
        cls = _attr(self.backend_path)
        if self.backend_options is None:
            return cls(bus, servos, read=read, joint_limits=joint_limits, **options)
        taken = {k: v for k, v in options.items() if k in self.backend_options}
        return cls(bus, servos, joint_limits=joint_limits, **taken)


_H = "hilbot.hal."
#: Every family, by name.
FAMILIES: Mapping[str, Family] = MappingProxyType(
    {
        "dynamixel": Family(
            name="dynamixel",
            title="Dynamixel",
            protocols=(2, 1),
            has_bus_watchdog=True,
            homing_sign=1,
            lerobot_written_direction=False,
            own_settings=("mode", "current_limit", "profile_velocity", "profile_acceleration"),
            settings_note="",
            ignore_note=" (X series: cap the torque with mode: current_position and current_limit)",
            models_path=_H + "dynamixel.tables.MODELS",
            model_path=_H + "dynamixel.tables.model",
            rate_path=_H + "dynamixel.timing.max_cycle_rate",
            diagnose_path=_H + "dynamixel.tools.diagnose",
            backend_path=_H + "dynamixel.backend.DynamixelBackend",
        ),
        "feetech": Family(
            name="feetech",
            title="Feetech",
            protocols=(),
            has_bus_watchdog=False,
            homing_sign=-1,
            lerobot_written_direction=True,
            own_settings=("torque_limit",),
            settings_note=" (Torque Limit)",
            ignore_note="",
            models_path=_H + "feetech.tables.MODELS",
            model_path=_H + "feetech.tables.model",
            rate_path=_H + "feetech.tables.max_cycle_rate",
            diagnose_path=_H + "feetech.tools.diagnose",
            backend_path=_H + "feetech.backend.FeetechBackend",
            check_path=_H + "feetech.session.check_settings",
            backend_options=(
                "margin_ms",
                "retries",
                "io_timeout",
                "torque_off_on_exit",
                "clock",
                "logger",
                "pipeline",
            ),
        ),
    }
)


def family(name: str) -> Family:
    """The family called ``name``; ``ValueError`` listing the known ones."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown servo family {name!r}; known: {', '.join(FAMILIES)}") from None
