"""``running_virtual_bus``: a virtual Dynamixel bus set up in joint space, ready to enter.

Used by ``hilbot sim-bus``, the bench and tests; shipped for your own tests too,
like httpx's ``MockTransport``. A pytest fixture::

    import pytest
    from hilbot.sim import running_virtual_bus

    @pytest.fixture
    def bus():
        with running_virtual_bus({1: "XM430-W350", 2: "XM430-W350"}) as bus:
            yield bus

    def test_reads(bus):
        backend = DynamixelBackend(BusSpec(bus.port), servos)
        ...

``running_virtual_bus`` returns the (not yet started) ``VirtualBus``; entering it with
``with`` or ``async with`` starts the server thread and leaving it closes the pty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hilbot.hal.dynamixel.units import ServoUnits
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.virtual_bus import ServoList, VirtualBus


def running_virtual_bus(
    servos: ServoList,
    *,
    protocol: int = 2,
    baudrate: int = 1_000_000,
    initial_positions: Mapping[str, float] | Mapping[int, int] | None = None,
    return_delay_time: int | None = None,
    seed: int = 0,
    clock: Callable[[], float] | None = None,
    **options: Any,
) -> VirtualBus:
    """A ``VirtualBus`` for ``servos``, to be entered with ``with`` or ``async with``.

    Args:
        servos: ``ServoSpec`` list (as a robot config gives) or ``{id: model name}``.
        protocol: 1 or 2.
        baudrate: [bit/s].
        initial_positions: joint positions ``{joint name: rad or m}`` (converted to
            ticks through each servo's offset, direction and gear ratio, shadows
            included), or raw ``{servo id: ticks}``.
        return_delay_time: register value [2 µs] for every servo; ``None`` = default.
        seed: seed of injected random faults.
        clock: time source of the dynamics model; default ``time.monotonic``.
        **options: other ``VirtualBus`` keyword arguments (``physics``, ``wire_timing``).
    """
    ticks = _initial_ticks(servos, initial_positions or {})
    if clock is not None:
        options["clock"] = clock
    return VirtualBus(
        servos,
        protocol,
        baudrate,
        initial_positions=ticks,
        return_delay_time=return_delay_time,
        seed=seed,
        **options,
    )


def _initial_ticks(
    servos: ServoList, positions: Mapping[str, float] | Mapping[int, int]
) -> dict[int, int]:
    if not positions:
        return {}
    if all(isinstance(key, int) for key in positions):
        return {int(k): int(v) for k, v in positions.items()}
    if isinstance(servos, Mapping):
        raise TypeError("joint-space initial_positions need ServoSpec servos, not {id: model}")
    return _joint_ticks(servos, positions)  # type: ignore[arg-type]


def _joint_ticks(servos: Sequence[ServoSpec], positions: Mapping[str, float]) -> dict[int, int]:
    out: dict[int, int] = {}
    for spec in servos:
        if spec.joint in positions:
            out[spec.id] = ServoUnits.of(spec).ticks(float(positions[spec.joint]))
    return out
