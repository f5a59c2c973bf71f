"""``running_feetech_bus``: a virtual Feetech bus for a config's servos, ready to enter.

The sibling of ``running_virtual_bus`` (Dynamixel), for ``hilbot sim-bus``, the bench
and tests::

    from hilbot.sim.feetech_bus_runner import running_feetech_bus

    with running_feetech_bus([(1, "STS3215"), (2, "STS3215")], baudrate=1_000_000) as bus:
        backend = ...  # open bus.port like a USB adapter

The bus is returned not yet started: entering it with ``with`` or ``async with``
starts the server thread, leaving it closes the pty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hilbot.hal.feetech import tables
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.feetech_bus import FeetechServoList, FeetechVirtualBus


def running_feetech_bus(
    servos: FeetechServoList | Sequence[ServoSpec],
    *,
    baudrate: int = 1_000_000,
    initial_positions: Mapping[str, float] | Mapping[int, int] | None = None,
    return_delay_time: int | None = None,
    seed: int = 0,
    clock: Callable[[], float] | None = None,
    **options: Any,
) -> FeetechVirtualBus:
    """A ``FeetechVirtualBus`` for ``servos``, to be entered with ``with`` or ``async with``.

    Args:
        servos: ``(id, model)`` pairs, ``{id: model}``, or ``ServoSpec`` values (as a
            robot config gives).
        baudrate: [bit/s]; one of the models' Baud Rate values (1 Mbps default).
        initial_positions: joint positions ``{joint: rad or m}`` (``ServoSpec`` servos
            only: converted through each servo's offset, direction and gear ratio), or
            raw ``{servo id: step}``.
        return_delay_time: Return Delay Time of every servo [2 µs]; ``None`` = default.
        seed: seed of injected random faults.
        clock: time source of the dynamics model; default ``time.monotonic``.
        **options: other ``FeetechVirtualBus`` keyword arguments (``physics``,
            ``wire_timing``).

    Raises:
        ConfigError: see ``FeetechVirtualBus``.
        TypeError: joint-space positions for servos given without joints.
    """
    pairs = _pairs(servos)
    ticks = _initial_ticks(servos, initial_positions or {})
    if clock is not None:
        options["clock"] = clock
    return FeetechVirtualBus(
        pairs,
        baudrate,
        initial_positions=ticks,
        return_delay_time=return_delay_time,
        seed=seed,
        **options,
    )


def _pairs(servos: FeetechServoList | Sequence[ServoSpec]) -> list[tuple[int, str]]:
    if isinstance(servos, Mapping):
        return list(servos.items())
    return [(s.id, s.model) if isinstance(s, ServoSpec) else (s[0], s[1]) for s in servos]


def _initial_ticks(
    servos: FeetechServoList | Sequence[ServoSpec],
    positions: Mapping[str, float] | Mapping[int, int],
) -> dict[int, int]:
    if not positions:
        return {}
    if all(isinstance(key, int) for key in positions):
        return {int(k): int(v) for k, v in positions.items()}
    specs = [] if isinstance(servos, Mapping) else [s for s in servos if isinstance(s, ServoSpec)]
    if not specs:
        raise TypeError("joint-space initial_positions need ServoSpec servos, not (id, model)")
    joints: Mapping[str, float] = positions  # type: ignore[assignment]
    out: dict[int, int] = {}
    for spec in specs:
        if spec.joint in joints:
            model = tables.model(spec.model)
            shaft = (float(joints[spec.joint]) - spec.offset) * spec.direction * spec.gear_ratio
            out[spec.id] = model.center_tick + round(shaft / model.radians_per_tick)
    return out
