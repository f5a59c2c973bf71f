"""Build the backend ``hilbot run`` drives: simulated, virtual buses, or the real buses.

- ``sim``: :class:`hilbot.sim.SimBackend` in-process, starting at the home pose.
- ``mujoco``: the simulator's servos driving a MuJoCo body (the ``mujoco`` extra).
- ``virtual``: a virtual bus on a pseudo-terminal per config bus (Dynamixel or Feetech,
  as the bus's ``family`` says), each driven by that family's real backend.
- ``hardware`` (old name ``dynamixel``, still accepted): the real buses named in the
  config, each driven by its family's backend.

Robots with several buses get one backend per bus, joined by :class:`MultiBackend`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final

import numpy as np

from hilbot._compat import Self
from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.errors import DriverError
from hilbot.hal.backend import Backend, BusCounters, JointState

#: Set by the process that starts a virtual bus for itself (``hilbot run --backend
#: virtual``): its pid, and the temporary folder of the bus's config, which is removed
#: if that process dies without ending the bus (``kill -9``), so no orphan stays behind.
PARENT_ENV: Final = "HILBOT_SIM_BUS_PARENT"
OWNED_DIR_ENV: Final = "HILBOT_SIM_BUS_OWNED_DIR"


class BackendError(DriverError):
    """The requested backend cannot be built (missing port, unknown kind, ...)."""


class MultiBackend:
    """Several backends (one per bus) seen as one; buses are read and written concurrently.

    Args:
        backends: the per-bus backends; their joint names must not overlap.
    """

    def __init__(self, backends: Sequence[Backend]) -> None:
        if not backends:
            raise ValueError("MultiBackend needs at least one backend")
        names: list[str] = []
        for b in backends:
            names.extend(b.joint_names)
        if len(set(names)) != len(names):
            raise ValueError(f"backends drive overlapping joints: {names}")
        self._backends = tuple(backends)
        self._names = tuple(names)
        self._owner = {n: i for i, b in enumerate(backends) for n in b.joint_names}
        self._stack = contextlib.AsyncExitStack()

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints of every backend, in backend order."""
        return self._names

    async def __aenter__(self) -> Self:
        async with contextlib.AsyncExitStack() as stack:
            for backend in self._backends:
                await stack.enter_async_context(backend)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.__aexit__(exc_type, exc, tb)

    async def read(self) -> JointState:
        """Read every bus concurrently and join the states (timestamp: the latest)."""
        import asyncio

        states = await asyncio.gather(*(b.read() for b in self._backends))
        counters = BusCounters()
        for s in states:
            for field in (
                "transactions",
                "timeouts",
                "crc_errors",
                "retries",
                "servo_errors",
                "watchdog_trips",
            ):
                setattr(counters, field, getattr(counters, field) + getattr(s.counters, field))
        return JointState(
            names=self._names,
            position=np.concatenate([s.position for s in states]),
            velocity=np.concatenate([s.velocity for s in states]),
            effort=np.concatenate([s.effort for s in states]),
            temperature=np.concatenate([s.temperature for s in states]),
            hardware_errors=tuple(f for s in states for f in s.hardware_errors),
            timestamp=max(s.timestamp for s in states),
            effort_unit=tuple(u for s in states for u in s.effort_unit),
            counters=counters,
            bus_watchdog_tripped=tuple(j for s in states for j in s.bus_watchdog_tripped),
        )

    def _split(self, joints: Iterable[str]) -> dict[int, list[str]]:
        parts: dict[int, list[str]] = {}
        for joint in joints:
            if joint not in self._owner:
                raise KeyError(f"unknown joint {joint!r}; known: {', '.join(self._names)}")
            parts.setdefault(self._owner[joint], []).append(joint)
        return parts

    async def write(self, positions: Mapping[str, float]) -> None:
        """Write each bus its share of ``positions``, concurrently."""
        import asyncio

        parts = self._split(positions)
        await asyncio.gather(
            *(
                self._backends[i].write({j: positions[j] for j in joints})
                for i, joints in parts.items()
            )
        )

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        """Enable or disable torque on every bus (or on the buses of ``joints``)."""
        import asyncio

        if joints is None:
            await asyncio.gather(*(b.set_torque(enabled) for b in self._backends))
            return
        parts = self._split(joints)
        await asyncio.gather(*(self._backends[i].set_torque(enabled, j) for i, j in parts.items()))

    async def enable_holding(self, positions: Mapping[str, float]) -> None:
        """Enable torque on every bus, each holding its share of ``positions``."""
        import asyncio

        from hilbot.hal.backend import enable_holding

        parts = self._split(positions)
        await asyncio.gather(
            *(
                enable_holding(self._backends[i], {j: positions[j] for j in joints})
                for i, joints in parts.items()
            )
        )

    async def reboot(self, joints: Iterable[str]) -> None:
        """Reboot the servos of ``joints`` on their buses."""
        for i, part in self._split(joints).items():
            await self._backends[i].reboot(part)

    async def close(self) -> None:
        """Close every backend."""
        for backend in self._backends:
            await backend.close()

    async def arm_watchdog(self, timeout: float) -> None:
        """Arm the servo-side bus watchdog on every bus that has one."""
        for backend in self._backends:
            arm = getattr(backend, "arm_watchdog", None)
            if arm is not None:
                await arm(timeout)

    async def disarm_watchdog(self) -> None:
        """Disarm (and clear a trip of) the servo-side bus watchdog on every bus."""
        for backend in self._backends:
            disarm = getattr(backend, "disarm_watchdog", None)
            if disarm is not None:
                await disarm()


def sim_backend(config: RobotConfig, **options: Any) -> Backend:
    """A :class:`SimBackend` per bus of the config, resting at the home pose."""
    from hilbot.driver.runtime.validation import load_robot
    from hilbot.sim.sim_backend import SimBackend

    robot = load_robot(config.urdf)
    limits = {}
    for joint in config.joint_names:  # URDF limits narrowed by the soft limits, where finite
        lower, upper = robot.joints[joint].bounds()
        soft = config.safety.soft_limits.get(joint)
        if soft is not None:
            lower, upper = max(lower, soft[0]), min(upper, soft[1])
        if np.isfinite(lower) and np.isfinite(upper):
            limits[joint] = (lower, upper)
    options.setdefault("initial_positions", dict(config.home))
    backends: list[Backend] = []
    for bus in config.buses:  # one simulated bus per real one: ids may repeat across buses
        servos = config.servo_specs(bus.name)
        joints = {s.joint for s in servos}
        initial = {j: v for j, v in options["initial_positions"].items() if j in joints}
        backends.append(
            SimBackend(
                servos,
                joint_limits={j: v for j, v in limits.items() if j in joints},
                **{**options, "initial_positions": initial},
            )
        )
    return backends[0] if len(backends) == 1 else MultiBackend(backends)


def mujoco_backend(config: RobotConfig, *, scene: Sequence[Any] = (), **options: Any) -> Backend:
    """One :class:`~hilbot.sim.mujoco_body.MujocoBackend` for every servo of the config.

    All buses share one body, so a robot with several buses is one backend; servo ids
    that repeat across buses are renumbered (they name the simulated servos' fault
    records only). Needs the ``mujoco`` extra.

    Raises:
        BackendError: the ``mujoco`` package is not installed.
    """
    import dataclasses

    try:
        from hilbot.sim.mujoco_body import MujocoBackend
    except ImportError:
        raise BackendError(
            "--backend mujoco needs the mujoco package, the mujoco extra: pip install '.[mujoco]' "
            "in the hilbot clone"
        ) from None
    from hilbot.driver.runtime.validation import load_robot

    robot = load_robot(config.urdf)
    servos = [s for bus in config.buses for s in config.servo_specs(bus.name)]
    if len({s.id for s in servos}) != len(servos):
        renumber = {
            (b.name, s.id): k + 1
            for k, (b, s) in enumerate(
                (b, s) for b in config.buses for s in config.servo_specs(b.name)
            )
        }
        servos = [
            dataclasses.replace(
                s,
                id=renumber[(b.name, s.id)],
                shadow_of=None if s.shadow_of is None else renumber[(b.name, s.shadow_of)],
            )
            for b in config.buses
            for s in config.servo_specs(b.name)
        ]
    options.setdefault("initial_positions", dict(config.home))
    return MujocoBackend(
        servos, robot, scene=scene, joint_limits=_enforced_limits(config), **options
    )


def dynamixel_backend(
    config: RobotConfig, ports: Mapping[str, str] | None = None, **options: Any
) -> Backend:
    """The real Dynamixel backend(s) of the config, optionally on other ports (virtual buses).

    A bus with ``family: feetech`` gets a ``FeetechBackend`` instead (the options it
    shares: ``margin_ms``, ``retries``, ``io_timeout``), so mixed robots work too.

    ``options`` go to every ``DynamixelBackend`` (``margin_ms``, ``retries``, ...). Each
    gets its bus's read set and the joint limits the safety layer enforces, which its
    start-up checks against every servo's own limit registers.
    """
    import dataclasses

    from hilbot.hal.family import family

    limits = _enforced_limits(config)
    backends: list[Backend] = []
    for bus in config.buses:
        spec = bus.bus_spec()
        if ports is not None:
            spec = dataclasses.replace(spec, port=ports[bus.name])
        servos = config.servo_specs(bus.name)
        joints = {s.joint for s in servos}
        bus_options = dict(options)
        if bus.reply_margin_ms is not None:  # the config's margin; a caller's overrides it
            bus_options.setdefault("margin_ms", bus.reply_margin_ms)
        backends.append(
            family(bus.family).backend(
                spec,
                servos,
                read=bus.read,
                joint_limits={j: v for j, v in limits.items() if j in joints},
                **bus_options,
            )
        )
    return backends[0] if len(backends) == 1 else MultiBackend(backends)


def _enforced_limits(config: RobotConfig) -> dict[str, tuple[float, float]]:
    """The finite joint limits the safety layer enforces (URDF, margin, soft limits)."""
    from hilbot.driver.runtime.safety import effective_limits
    from hilbot.driver.runtime.validation import load_robot

    robot = load_robot(config.urdf)
    names = list(config.joint_names)
    urdf = {j: (*robot.joints[j].bounds(), 1.0) for j in names}
    limits = effective_limits(
        names,
        urdf,
        soft_limits=config.safety.soft_limits,
        margin=config.safety.soft_limit_margin,
        velocity=1.0,
    )
    return {
        j: (float(lo), float(hi))
        for j, lo, hi in zip(names, limits.lower, limits.upper, strict=True)
        if np.isfinite(lo) and np.isfinite(hi)
    }


@contextlib.asynccontextmanager
async def build_backend(
    config: RobotConfig,
    kind: str,
    *,
    virtual_return_delay: int | None = 0,
    sim_bus_args: Sequence[str] = (),
    scene: Sequence[Any] = (),
    bus_config: RobotConfig | None = None,
) -> AsyncIterator[Backend]:
    """Yield the (not yet entered) backend of ``kind`` for ``config``.

    For ``virtual``, the virtual buses run for as long as the context is open, their
    servos with ``virtual_return_delay`` as Return Delay Time (see :func:`virtual_buses`),
    and ``sim_bus_args`` as further ``hilbot sim-bus`` options (``--hand``, ``--mount``).
    ``bus_config`` is the config the virtual buses are built from when it is not
    ``config`` (a calibrated config drives buses set up as the uncalibrated one says).
    For ``mujoco``, ``scene`` are the objects around the robot (``SceneObject``).

    Raises:
        BackendError: unknown kind.
    """
    if kind == "sim":
        yield sim_backend(config)
    elif kind == "mujoco":
        yield mujoco_backend(config, scene=scene)
    elif backend_name(kind) == HARDWARE:
        yield dynamixel_backend(config, pipeline="auto")
    elif kind == "virtual":
        async with virtual_buses(
            bus_config or config, return_delay_time=virtual_return_delay, extra_args=sim_bus_args
        ) as ports:
            options = await virtual_options(config.safety.bus_watchdog)
            yield dynamixel_backend(config, ports, pipeline="auto", **options)
    else:
        raise BackendError(f"unknown backend {kind!r}; expected sim, mujoco, virtual or hardware")


@contextlib.asynccontextmanager
async def virtual_buses(
    config: RobotConfig,
    *,
    timeout: float = 20.0,
    return_delay_time: int | None = 0,
    extra_args: Sequence[str] = (),
) -> AsyncIterator[dict[str, str]]:
    """Serve the config's buses as virtual Dynamixel buses in a child process.

    The buses run in their own process (``hilbot sim-bus``), like a real device: the
    host's event loop and the simulated servos do not share one interpreter lock.
    Yields ``{bus name: pty path}``; the child is terminated on exit.

    ``return_delay_time`` is every virtual servo's Return Delay Time register (2 µs units).
    The default, 0, is an arm set up as docs/hardware.md recommends; ``None`` keeps the
    factory value (250, 500 µs before every reply), as a servo straight from the box has.

    Raises:
        BackendError: the child did not report its ports within ``timeout`` seconds.
    """
    import asyncio
    import os
    import tempfile

    import yaml

    from hilbot.driver.child_python import python_command

    data = config.model_dump(mode="json", exclude={"teleop"})
    with tempfile.TemporaryDirectory(prefix="hilbot-vbus-") as tmp:
        path = os.path.join(tmp, f"{config.name}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(data, f)
        proc = await asyncio.create_subprocess_exec(
            *python_command(
                "hilbot",
                "sim-bus",
                path,
                *(() if return_delay_time is None else ("--return-delay", str(return_delay_time))),
                *extra_args,
            ),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            # It watches this process: killed outright (kill -9), we cannot end it, so it
            # ends itself and removes its config's folder (no orphan bus left behind).
            env={**os.environ, PARENT_ENV: str(os.getpid()), OWNED_DIR_ENV: tmp},
            # Its own session, so its own process group: Ctrl+C at a terminal signals the
            # foreground group, and the virtual servos must outlive it until the runtime has
            # turned torque off (the ``finally`` below ends the child). (Not process_group=0:
            # Python 3.10 does not have it.)
            start_new_session=True,
        )
        try:
            try:
                ports = await asyncio.wait_for(_read_ports(proc, config), timeout)
            except (TimeoutError, asyncio.TimeoutError):  # 3.10's wait_for: the latter
                raise BackendError(f"the virtual bus did not start within {timeout} s") from None
            yield ports
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 5.0)
                except (TimeoutError, asyncio.TimeoutError):  # 3.10's wait_for: the latter
                    proc.kill()
                    await proc.wait()


async def _read_ports(proc: Any, config: RobotConfig) -> dict[str, str]:
    ports: dict[str, str] = {}
    names = {b.name for b in config.buses}
    while set(ports) != names:
        line = (await proc.stdout.readline()).decode()
        if not line:
            err = (await proc.stderr.read()).decode().strip()
            raise BackendError(f"the virtual bus exited: {err or 'no output'}")
        name, _, rest = line.partition(": ")
        if name in names and rest:
            ports[name] = rest.split()[0]
    return ports


# --- The names ``--backend`` takes, and the old name kept for scripts written before Feetech.
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


# --- Reply deadlines for virtual buses, taken from how late this host wakes threads right now.
#: [ms] the least reply margin on a virtual bus (a scheduler tick or two on a busy host).
VIRTUAL_MARGIN_MS = 20.0
#: Retries of a failed virtual-bus transaction: a stall can outlast one retry, whose late
#: reply then garbles the next.
VIRTUAL_RETRIES = 2
#: Thread wake-ups in one virtual-bus round trip, each of which a busy host can delay by a
#: scheduling stall: the bus server thread wakes on the request and takes the GIL, then the
#: backend's worker thread wakes on the reply and takes the GIL back.
ROUND_TRIP_WAKEUPS = 4
PROBE_TIME = 0.25  # [s] spent measuring the host's scheduling stalls
PROBE_SLEEP = 0.001  # [s] one probe: how late does a thread wake from this sleep?


def scheduling_stall_ms(duration: float = PROBE_TIME) -> float:
    """The worst delay [ms] beyond a 1 ms sleep seen in ``duration`` seconds, on this host now."""
    worst = 0.0
    end = time.perf_counter() + duration
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        time.sleep(PROBE_SLEEP)
        worst = max(worst, time.perf_counter() - t0 - PROBE_SLEEP)
    return worst * 1e3


def run_queue_wait(thread: int | None = None) -> float | None:
    """The time [s] a thread of this process has spent runnable but waiting for a CPU.

    The kernel's own count (``/proc/self/task/TID/schedstat``, Linux) of what the host
    imposed on ``thread`` (a native id; None: the calling thread): its neighbours' CPU
    use, never its own work, which :class:`StallMonitor`'s wake-ups would also count
    (its thread waits for the GIL that the others hold). A thread that needs the CPU
    feels a busy host more than a sleeping probe does (on a 2-core machine with two
    CPU-bound processes and more beside them, a probe's wake-ups were late 12-19 % of
    the time while a control loop's thread waited 50-70 %). None where not counted.
    """
    tid = threading.get_native_id() if thread is None else thread
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class StallMonitor:
    """The host's worst scheduling stall [ms] while a block runs, seen by a watching thread.

    ``with StallMonitor() as watch: ...`` then ``watch.worst_ms``: how much later than asked
    a thread of this process woke (from :data:`PROBE_SLEEP` sleeps) during the block. A
    reply that came later than its deadline while this was large was the host's doing
    (``hilbot doctor`` tells it from a servo's fault this way), not the wire's.
    """

    def __init__(self) -> None:
        self.worst_ms = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-monitor", daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()
            time.sleep(PROBE_SLEEP)
            late = (time.perf_counter() - t0 - PROBE_SLEEP) * 1e3
            self.worst_ms = max(self.worst_ms, late)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()


#: [s] ``safety.bus_watchdog``'s default in a robot config (a test pins the two together).
DEFAULT_BUS_WATCHDOG = 0.5


def virtual_margin_ms(
    bus_watchdog: float | None = DEFAULT_BUS_WATCHDOG,
    retries: int = VIRTUAL_RETRIES,
    *,
    stall_ms: float | None = None,
) -> float:
    """Reply deadline margin [ms] for a virtual bus on this host.

    At least :data:`VIRTUAL_MARGIN_MS`; :data:`ROUND_TRIP_WAKEUPS` stalls as measured now
    (``stall_ms``, measured here when None); at most half of what the servos' Bus
    Watchdog (``bus_watchdog`` [s], None = off) allows a failing read with its retries,
    so that a lost reply never starves the watchdog.
    """
    stall = scheduling_stall_ms() if stall_ms is None else stall_ms
    cap = math.inf if bus_watchdog is None else 0.5 * bus_watchdog * 1e3 / (retries + 1)
    return min(max(VIRTUAL_MARGIN_MS, ROUND_TRIP_WAKEUPS * stall), cap)


async def virtual_options(bus_watchdog: float | None) -> dict[str, Any]:
    """``margin_ms`` and ``retries`` for a backend on a virtual bus, measured off the loop."""
    stall = await asyncio.to_thread(scheduling_stall_ms)
    return {
        "margin_ms": virtual_margin_ms(bus_watchdog, VIRTUAL_RETRIES, stall_ms=stall),
        "retries": VIRTUAL_RETRIES,
    }
