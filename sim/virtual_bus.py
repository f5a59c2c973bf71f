"""The virtual buses: real Dynamixel (Protocol 1.0 / 2.0) and Feetech bytes on a pseudo-terminal.

``VirtualBus`` opens a pty and serves it from its own thread, so the real backend, the
vendor SDK (dynamixel-sdk, ``scservo_sdk``), rustypot or any serial tool opens
``bus.port`` like a U2D2 or a USB adapter::

    with VirtualBus({1: "XM430-W350", 2: "XM430-W350"}, protocol=2, baudrate=1_000_000) as bus:
        port = PortHandler(bus.port)
        ...
        bus.faults(2).drop_rate = 0.5

    with FeetechVirtualBus([(1, "STS3215"), (2, "STS3215")], baudrate=1_000_000) as bus:
        ...

One bus serves every family: packets are decoded and encoded by the family's codec in
``hilbot.hal`` (no second codec) and answered by the one instruction handler
(``hilbot.sim.instruction_handler``) under the family's dialect; each id has its
model's table bound to the servo dynamics model, advanced by the (injectable) clock.
The pty, the server thread and the wire timing are ``hilbot.sim.pty_server``'s: a reply
leaves at the time a real bus would have delivered its last byte (the instruction's
bytes, the servo's Return Delay Time, the reply's bytes, 10 bits a byte).

``running_virtual_bus`` and ``running_feetech_bus`` set a bus up in joint space, ready
to enter; shipped for your own tests too, like httpx's ``MockTransport``::

    @pytest.fixture
    def bus():
        with running_virtual_bus({1: "XM430-W350", 2: "XM430-W350"}) as bus:
            yield bus

The bus is returned not yet started: entering it with ``with`` or ``async with``
starts the server thread, leaving it closes the pty.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

from hilbot._compat import Unpack
from hilbot.hal.dynamixel import tables
from hilbot.hal.dynamixel.layout import ServoUnits
from hilbot.hal.errors import ConfigError
from hilbot.hal.feetech import tables as feetech_tables
from hilbot.hal.mapping import BusSpec, ServoSpec
from hilbot.sim.instruction_handler import (
    DYNAMIXEL_1,
    DYNAMIXEL_2,
    FEETECH,
    Dialect,
    Ins,
    InstructionHandler,
)
from hilbot.sim.pty_server import BusOptions, PtyBusServer, bus_model, check_unique_ids
from hilbot.sim.servo_firmware import FeetechServo, VirtualServo
from hilbot.sim.servo_physics import ServoPhysics, feetech_physics, physics_for

ServoList = Sequence[ServoSpec] | Mapping[int, str]
FeetechServoList = Sequence[tuple[int, str]] | Mapping[int, str]
_WRITES = (Ins.WRITE, Ins.REG_WRITE, Ins.SYNC_WRITE)
_READS = (Ins.READ, Ins.SYNC_READ)


class VirtualBus(PtyBusServer[Any, Any]):
    """Simulated Dynamixel servos answering on a pseudo-terminal.

    Args:
        servos: ``ServoSpec`` list (id and model are used) or ``{id: model name}``.
        protocol: 1 or 2; every model must speak it.
        baudrate: the servos' bit rate [bit/s]; also the rate used for wire timing when
            the host's rate cannot be read from the pty.
        **options: :class:`~hilbot.sim.pty_server.BusOptions`, as
            :class:`~hilbot.sim.pty_server.PtyBusServer` takes them (``clock``,
            ``physics``, ``wire_timing``, ``seed``, ``model_factory``);
            ``return_delay_time`` ``None`` keeps the factory default (250 = 500 µs),
            and ``initial_positions`` are ``{id: ticks}`` (default the center tick).

    Raises:
        ConfigError: unknown model, a model that does not speak ``protocol``, a bit
            rate the model cannot use, or a duplicate id.
    """

    dialect: Dialect

    def __init__(
        self,
        servos: ServoList,
        protocol: int = 2,
        baudrate: int = 1_000_000,
        **options: Unpack[BusOptions],
    ) -> None:
        BusSpec("virtual", baudrate, protocol)  # validates protocol and baud rate
        pairs = (
            list(servos.items())
            if isinstance(servos, Mapping)
            else [(s.id, s.model) for s in servos]
        )
        specs = [_model_spec(i, name, protocol, baudrate) for i, name in pairs]
        check_unique_ids(pairs)
        dialect = DYNAMIXEL_2 if protocol == 2 else DYNAMIXEL_1
        self._serve_family(pairs, specs, baudrate, VirtualServo, physics_for, dialect, options)

    def _serve_family(
        self,
        pairs: Sequence[tuple[int, str]],
        specs: Sequence[Any],
        baudrate: int,
        new_servo: Callable[..., Any],
        physics: Callable[[str], ServoPhysics],
        dialect: Dialect,
        options: BusOptions,
    ) -> None:
        self.dialect = dialect
        self.protocol = dialect.protocol
        super().__init__(pairs, specs, baudrate, new_servo, physics, **options)
        self.handler = InstructionHandler(dialect, self.servos, self.faults, self.host_rate)
        self._watchdogs = [s for s in self.servos if getattr(s.spec, "has_bus_watchdog", False)]

    @classmethod
    def from_config(
        cls, servos: Sequence[ServoSpec], bus: BusSpec, **kwargs: Unpack[BusOptions]
    ) -> VirtualBus:
        """A virtual bus for one configured bus: its servos, protocol and bit rate."""
        return cls(servos, bus.protocol, bus.baudrate, **kwargs)

    # ------------------------------------------------------------------ protocol

    def _is_instruction(self, item: object) -> TypeGuard[Any]:
        return isinstance(item, self.dialect.items)

    def _new_decoder(self) -> Any:
        return self.dialect.decoder()

    def _wire_size(self, item: Any) -> int:
        if not hasattr(item, "instruction"):
            return len(item.raw)
        return len(item.params) + self.dialect.overhead

    def _write_span(self, item: Any) -> tuple[int, int, int] | None:
        if not hasattr(item, "instruction") or self.dialect.ops.get(item.instruction) != Ins.WRITE:
            return None
        width = self.dialect.width
        if len(item.params) <= width:
            return None
        address = int.from_bytes(item.params[:width], "little")
        return item.id, address, len(item.params) - width

    def _note_position(
        self, item: Any, now: float, note: Callable[[str, float, list[int]], None]
    ) -> None:
        if not hasattr(item, "instruction") or not item.params or not self.servos:
            return
        inst = self.dialect.ops.get(item.instruction)
        if inst in _WRITES:
            kind, name = "goal", self.dialect.goal
        elif inst in _READS:
            kind, name = "read", self.dialect.position
        else:
            return
        width = self.dialect.group_width if inst is Ins.SYNC_READ else self.dialect.width
        reg = self.servos[0].spec.table.get(name)
        if reg is not None and int.from_bytes(item.params[:width], "little") == reg.address:
            if kind == "read":  # every servo's position now, not only the ones read
                for servo in self.servos:
                    servo.refresh(now)
            note(kind, now, [servo.memory.get(name) for servo in self.servos])

    def _before_step(self, now: float) -> None:
        self._expire_watchdogs(now)

    # ------------------------------------------------------------------ test API

    def register(self, servo_id: int, name: Any) -> int:
        """Current value of a register, as a read would return it."""
        return self._present_value(servo_id, lambda servo: servo.memory.get(name))

    def write_register(self, servo_id: int, name: Any, value: int) -> int:
        """WRITE ``value`` to a register as another host on the bus would; the ERR byte.

        The firmware's rules apply (EEPROM refused with torque on, ranges, Data Limit
        Error): this is another tool changing the servo behind the backend's back, not a
        test's poke into memory. ``0`` means the servo took it.
        """
        with self.lock:
            now = self._advance()
            servo = self.servo(servo_id)
            reg = servo.spec.table[name]
            error: int = servo.write(reg.address, reg.encode(value), now)
            return error

    def _expire_watchdogs(self, now: float) -> None:
        """Trip every Bus Watchdog that expired before ``now``, each at its own deadline.

        The model is stepped to the deadline first, so the servo stops where it was
        then, however late the next packet (or background step) notices.
        """
        while True:
            due, servo = math.inf, None
            for candidate in self._watchdogs:
                deadline = candidate.watchdog_deadline()
                if deadline < due:
                    due, servo = deadline, candidate
            if servo is None or due >= now:
                return
            faults = self.faults.get(servo.id)
            if faults is not None and not faults.answers:
                servo.heard(now)  # unpowered or hung: no firmware runs the watchdog
                continue
            if due > self._last:
                self.model.step(due - self._last)
                self._last = due
            servo.trip_watchdog()


class FeetechVirtualBus(VirtualBus):
    """Simulated Feetech servos answering on a pseudo-terminal.

    Args:
        servos: ``(id, model name)`` pairs or ``{id: model name}``.
        baudrate: the servos' bit rate [bit/s]; also the wire-timing rate when the
            host's rate cannot be read from the pty.
        **options: :class:`~hilbot.sim.pty_server.BusOptions`, as
            :class:`~hilbot.sim.pty_server.PtyBusServer` takes them (``clock``,
            ``physics``, ``wire_timing``, ``seed``, ``model_factory``);
            ``return_delay_time`` ``None`` keeps the table's default (0), and
            ``initial_positions`` are ``{id: raw step}`` (default the center step).
        models: memory tables by model name served instead of the shipped ones
            (``hilbot.hal.feetech.tables``) for the servos that name them: a firmware
            that differs from its table, e.g. one whose Torque Limit is read-only.

    Raises:
        ConfigError: unknown model, a bit rate a model cannot use, a duplicate id, or
            initial positions for servos not on the bus.
    """

    thread_name = "feetech-bus"
    log_label = "feetech bus"

    def __init__(  # the Feetech signature: no protocol, and model variants
        self,
        servos: FeetechServoList,
        baudrate: int = 1_000_000,
        *,
        models: Mapping[str, feetech_tables.FeetechModel] | None = None,
        **options: Unpack[BusOptions],
    ) -> None:
        pairs = list(servos.items()) if isinstance(servos, Mapping) else list(servos)
        check_unique_ids(pairs)
        variants = dict(models or {})

        def lookup(name: str) -> feetech_tables.FeetechModel:
            return variants[name] if name in variants else feetech_tables.model(name)

        specs = [bus_model(i, name, baudrate, lookup) for i, name in pairs]
        self._serve_family(pairs, specs, baudrate, FeetechServo, feetech_physics, FEETECH, options)


def _model_spec(servo_id: int, name: str, protocol: int, baudrate: int) -> tables.ModelSpec:
    def speaks_protocol(spec: tables.ModelSpec) -> None:
        if spec.protocol != protocol:
            raise ConfigError(
                f"servo {servo_id}: {spec.name} speaks Protocol {spec.protocol}.0, "
                f"but the bus is Protocol {protocol}.0",
                servo_id=servo_id,
                field="model",
            )

    return bus_model(servo_id, name, baudrate, tables.model, speaks_protocol)


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
    ticks = _initial_ticks(servos, initial_positions or {}, _dynamixel_tick, "{id: model}")
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
    if isinstance(servos, Mapping):
        pairs = list(servos.items())
    else:
        pairs = [(s.id, s.model) if isinstance(s, ServoSpec) else (s[0], s[1]) for s in servos]
    ticks = _initial_ticks(servos, initial_positions or {}, _feetech_tick, "(id, model)")
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


def _dynamixel_tick(spec: ServoSpec, position: float) -> int:
    return ServoUnits.of(spec).ticks(position)


def _feetech_tick(spec: ServoSpec, position: float) -> int:
    model = feetech_tables.model(spec.model)
    shaft = (position - spec.offset) * spec.direction * spec.gear_ratio
    return model.center_tick + round(shaft / model.radians_per_tick)


def _initial_ticks(
    servos: Any,
    positions: Mapping[str, float] | Mapping[int, int],
    tick: Callable[[ServoSpec, float], int],
    plain: str,
) -> dict[int, int]:
    """Power-up ticks by id: raw ``{id: tick}``, or joint positions through ``tick``."""
    if not positions:
        return {}
    if all(isinstance(key, int) for key in positions):
        return {int(k): int(v) for k, v in positions.items()}
    specs = [] if isinstance(servos, Mapping) else [s for s in servos if isinstance(s, ServoSpec)]
    if not specs:
        raise TypeError(f"joint-space initial_positions need ServoSpec servos, not {plain}")
    joints: Mapping[str, float] = positions  # type: ignore[assignment]
    return {s.id: tick(s, float(joints[s.joint])) for s in specs if s.joint in joints}
