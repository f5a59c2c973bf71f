"""Run a robot: the control loop at the configured rate, on a simulated, virtual or real bus.

The robot starts disarmed (torque as found, goal = present). ``--enable`` arms it;
targets come from ``--trajectory``, from MQTT teleop (an embedded broker unless
``--mqtt URL`` or ``--no-mqtt``), or from the Python API. Ctrl+C (SIGINT), SIGTERM
or SIGHUP (the terminal closed) stops it: the robot holds and torque goes off (per
the config), and the last lines say what the shutdown did.

Local e-stop, never through MQTT: press space or e in this terminal, or send SIGUSR1
(kill -USR1 PID). It latches like the MQTT estop (hold or torque off per
safety.estop_action) until a reset: the key c, or cmd reset over MQTT.

Exit status: 0 when the run ended (--duration, the trajectory, SIGTERM, SIGHUP), 130
after Ctrl+C (SIGINT), as hilbot lead and hilbot bench; 1 on a failure, 2 on bad input;
1 whenever the shutdown could not turn torque off (the last lines say what the servos
are left doing).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hilbot.driver.commands.failures import (
    EXIT_BAD_INPUT,
    add_view_port,
    port_problem,
    positive_hz,
    positive_seconds,
    reason_of,
    view_port,
    view_port_problem,
)
from hilbot.driver.commands.local_stop import HINT, LocalStop
from hilbot.driver.commands.shutdown_report import TorqueWatch, shutdown_text, torque_left_on
from hilbot.driver.progress import Progress
from hilbot.driver.runtime.backends import HARDWARE, backend_name, hardware_help
from hilbot.driver.runtime.errors import DriverError

DEFAULT_CONFIG = "openmanipulator_x"
EXIT_INTERRUPTED = 130  # Ctrl+C (SIGINT), as the shell reports it and lead and bench exit
STATUS_PERIOD = 0.25  # [s] between status line refreshes

log = logging.getLogger("hilbot.driver.run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``hilbot run`` options."""
    parser.add_argument(
        "config",
        nargs="?",
        default=DEFAULT_CONFIG,
        help=f"robot config: a YAML file or a shipped robot name (default {DEFAULT_CONFIG})",
    )
    parser.add_argument(
        "--backend",
        type=backend_name,
        choices=("sim", "mujoco", "virtual", HARDWARE),
        default="sim",
        help="sim: in-process simulator (default); mujoco: the servo model driving a MuJoCo "
        "body (the mujoco extra); virtual: virtual buses on pseudo-terminals (Dynamixel or "
        "Feetech, as the config's buses say), driven by the real backends; " + hardware_help(),
    )
    parser.add_argument(
        "--scene",
        type=Path,
        metavar="FILE",
        help="--backend mujoco: a YAML file of objects around the robot (a table, a box)",
    )
    parser.add_argument(
        "--view",
        action="store_true",
        help="serve a live 3D view of the robot on 127.0.0.1 (the view extra)",
    )
    add_view_port(parser)
    parser.add_argument(
        "--port",
        help="--backend hardware: serial port, overriding the config (single-bus robots)",
    )
    parser.add_argument(
        "--virtual-return-delay",
        type=int,
        metavar="N",
        help="--backend virtual: the virtual servos' Return Delay Time register, in 2 µs units "
        "(default 0, a set-up arm; 250 is the factory value)",
    )
    parser.add_argument(
        "--hand",
        choices=("sweep", "wave", "still"),
        help="--backend virtual: a scripted hand moves the torque-off virtual servos",
    )
    parser.add_argument(
        "--mount",
        action="append",
        default=[],
        metavar="ID:DEG[:reversed]",
        help="--backend virtual: assemble virtual servo ID this many degrees off (repeat)",
    )
    parser.add_argument(
        "--calibration",
        type=Path,
        metavar="FILE",
        help="apply this calibration file (default: the robot's file from hilbot calibrate, "
        "when there is one, on the virtual and dynamixel backends)",
    )
    parser.add_argument(
        "--rate", type=positive_hz, metavar="HZ", help="loop rate, overriding the config"
    )
    parser.add_argument(
        "--duration", type=positive_seconds, metavar="S", help="stop after S seconds"
    )
    parser.add_argument("--enable", action="store_true", help="enable torque (arm) at start")
    parser.add_argument(
        "--trajectory", type=Path, metavar="FILE", help="play a YAML/CSV trajectory"
    )
    mqtt = parser.add_mutually_exclusive_group()
    mqtt.add_argument("--mqtt", metavar="URL", help="MQTT broker (mqtt://host:port, mqtts://...)")
    mqtt.add_argument("--no-mqtt", action="store_true", help="no MQTT teleop")
    parser.add_argument(
        "--broker-port",
        type=int,
        metavar="PORT",
        help="port of the embedded MQTT broker (default teleop.embedded_port, 1883; 0: any free)",
    )
    parser.add_argument(
        "--broker-host",
        metavar="ADDR",
        help="address the embedded broker binds (default 127.0.0.1; any other needs a login)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="run even though the MQTT broker is reachable beyond this machine without a login",
    )
    parser.add_argument(
        "--takeover",
        action="store_true",
        help="answer to this robot's MQTT topics even if another driver is online there "
        "(that one stops); without it, hilbot run refuses to start",
    )
    parser.add_argument(
        "--demo", choices=("circle", "figure8"), help="publish a demo pattern through MQTT"
    )
    parser.add_argument("--stats", type=Path, metavar="FILE", help="write final loop stats as JSON")
    parser.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="record every cycle to FILE (.npz); report it with hilbot replay FILE",
    )
    parser.add_argument("--no-status", action="store_true", help="no live status line")
    from hilbot.driver.dataset import options as dataset_options

    dataset_options.add_arguments(parser)
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="run the control loop under SCHED_FIFO (Linux, root or CAP_SYS_NICE): far lower "
        "lateness on a busy machine",
    )


def run(args: argparse.Namespace) -> int:
    """Run until the duration ends, the trajectory finishes (with --duration), or a signal."""
    from hilbot.driver.runtime.backends import BackendError, build_backend
    from hilbot.driver.runtime.config import load_config
    from hilbot.driver.runtime.errors import ConfigError
    from hilbot.driver.runtime.ticker import enable_realtime
    from hilbot.hal.errors import HalError

    problem = option_problem(args)
    if problem is not None:
        print(f"hilbot run: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.trajectory is not None and not args.enable:
        log.warning("--trajectory without --enable: the robot stays disarmed and does not move")
    if args.realtime and not enable_realtime():
        log.warning("--realtime: SCHED_FIFO not permitted here (needs root or CAP_SYS_NICE)")
    try:
        config = load_config(args.config)
        if args.rate is not None:
            config = _with_rate(config, args.rate, check_bus=args.backend not in ("sim", "mujoco"))
        if args.port is not None:
            config = _with_port(config, args.port)
        config = _calibrated(args, config)
        if not args.no_mqtt:
            from hilbot.driver.teleop.settings import teleop_config

            config = teleop_config(config, args, log)
        trajectory = None
        if args.trajectory is not None:
            from hilbot.driver.runtime.trajectory import load_trajectory

            trajectory = load_trajectory(trajectory_file(args.trajectory))
        if getattr(args, "dataset", None) is not None:  # the episodes of what drives it
            from hilbot.driver.dataset import options as dataset_options

            args.dataset_recording = dataset_options.open_writer(
                args, config, args.calibrated.calibration, args.calibrated.bus_config
            )
    except ConfigError as exc:
        print(f"hilbot run: bad config: {exc}", file=sys.stderr)
        return 2
    except DriverError as exc:
        print(f"hilbot run: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_main(args, config, trajectory, build_backend))
    except (BackendError, HalError) as exc:
        if getattr(args, "torque_watch", None) is None:  # failed to start: said below
            return _start_failure(args, config, exc)
        # The bus failed while the robot ran (a port gone, an adapter unplugged).
        print(shutdown_text(config, args.torque_watch))
        print(f"hilbot run: the bus failed while running: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _start_failure(args: argparse.Namespace, config: Any, exc: Exception) -> int:
    """One line on why the run could not start (a port, the virtual bus); its exit code."""
    from hilbot.hal.errors import PortError

    if isinstance(exc, PortError):
        origin = port_origin(args, config, exc.port)
        print(f"hilbot run: {port_problem(exc.port, reason_of(exc), origin)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"hilbot run: {exc}", file=sys.stderr)
    return 1


def trajectory_file(path: Path) -> Path:
    """``--trajectory``: the file, or else the shipped trajectory of that name (``wave.yaml``).

    Raises:
        TrajectoryError: neither exists; the message names the shipped ones.
    """
    from hilbot.configs import trajectory_names, trajectory_path
    from hilbot.driver.runtime.errors import TrajectoryError

    if path.exists():
        return path
    try:
        return trajectory_path(str(path))
    except FileNotFoundError:
        shipped = ", ".join(trajectory_names())
        reason = f"no such file, and no shipped trajectory of that name (shipped: {shipped})"
        raise TrajectoryError(path, "file", reason) from None


def option_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with a combination of options (one they ignore), if anything."""
    if getattr(args, "dataset", None) is not None or getattr(args, "task", None) is not None:
        from hilbot.driver.dataset import options as dataset_options

        dataset = dataset_options.problem(args)
        if dataset is not None:
            return dataset
    if getattr(args, "demo", None) is not None and args.no_mqtt:
        return "--demo publishes through MQTT; drop --no-mqtt"
    view_problem = view_port_problem(args)
    if view_problem is not None:
        return view_problem
    if args.port is not None and args.backend != HARDWARE:
        return (
            f"--port is for --backend hardware; the {args.backend} backend opens no serial "
            "port of yours (drop --port, or add --backend hardware)"
        )
    if args.virtual_return_delay is not None and args.backend != "virtual":
        return f"--virtual-return-delay is for --backend virtual, not {args.backend}"
    if (getattr(args, "hand", None) or getattr(args, "mount", None)) and args.backend != "virtual":
        return f"--hand and --mount are for --backend virtual, not {args.backend}"
    for mount in getattr(args, "mount", None) or ():
        from hilbot.sim.mounting import parse_mounting

        try:
            parse_mounting(mount)
        except ValueError as exc:
            return str(exc)
    if getattr(args, "scene", None) is not None and args.backend != "mujoco":
        return f"--scene is for --backend mujoco, not {args.backend}"
    for option in ("stats", "record"):
        path = getattr(args, option, None)
        if path is not None and not Path(path).parent.is_dir():
            return f"--{option} {path}: the folder {Path(path).parent} does not exist"
    if getattr(args, "record", None) is not None:
        from hilbot.driver.bench.stream import leftover_problem

        return leftover_problem(Path(args.record), "--record")
    return None


def _calibrated(args: argparse.Namespace, config: Any) -> Any:
    """``config`` with the robot's calibration applied, if it has one (or ``--calibration``).

    Sets ``args.calibrated`` (a :class:`~hilbot.driver.calibration.apply.Calibrated`: the
    calibration, if any, the uncalibrated config the virtual buses are built from, and the
    check of the first reading).
    """
    from hilbot.driver.calibration.apply import load_calibrated

    calibrated = load_calibrated(
        config,
        args.backend,
        getattr(args, "calibration", None),
        source=str(args.config),
        port=getattr(args, "port", None),
    )
    args.calibrated = calibrated
    calibration = calibrated.calibration
    if calibration is not None:
        log.info("applying the calibration of %s on %s", calibration.robot, calibration.port)
    return calibrated.config


def sim_bus_options(args: argparse.Namespace) -> list[str]:
    """The ``hilbot sim-bus`` options ``--hand`` and ``--mount`` ask for.

    Without ``--mount``, a virtual arm is assembled as its calibration records.
    """
    out = [] if getattr(args, "hand", None) is None else ["--hand", args.hand]
    mounts = getattr(args, "mount", None) or ()
    calibrated = getattr(args, "calibrated", None)
    if calibrated is not None and args.backend == "virtual":
        mount_args: list[str] = calibrated.mount_args(mounts)
        return out + mount_args
    for mount in mounts:
        out += ["--mount", mount]
    return out


def port_origin(args: argparse.Namespace, config: Any, port: str) -> str:
    """Where the serial port ``port`` was named: ``--port`` or the config's bus."""
    if args.port is not None:
        return "--port"
    for i, bus in enumerate(config.buses):
        if bus.port == port:
            return f"buses[{i}].port of the config {args.config}"
    return f"the config {args.config}"


def _with_rate(config: Any, rate: float, *, check_bus: bool) -> Any:
    from pydantic import TypeAdapter, ValidationError

    from hilbot.driver.runtime.config import RateHz, check_watchdog
    from hilbot.driver.runtime.errors import ConfigError
    from hilbot.driver.runtime.validation import check_rate

    try:
        TypeAdapter(RateHz).validate_python(rate)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise ConfigError(None, ("rate_hz",), f"--rate {rate:g}: {problem}") from None
    updated = config.model_copy(update={"rate_hz": rate})
    check_watchdog(updated)
    if check_bus:
        check_rate(updated, source=None)
    return updated


def _with_port(config: Any, port: str) -> Any:
    from hilbot.driver.runtime.errors import ConfigError

    if len(config.buses) != 1:
        raise ConfigError(None, ("buses",), "--port needs a single-bus robot; edit the config")
    bus = config.buses[0].model_copy(update={"port": port})
    return config.model_copy(update={"buses": (bus,)})


async def _cancel_all(tasks: list[asyncio.Task[Any]], *, attempts: int = 5) -> list[Any]:
    """Cancel ``tasks`` and collect their results, cancelling again those that linger.

    Python 3.11's ``asyncio.wait_for`` can swallow a ``cancel()`` (our MQTT clients avoid
    it, see :mod:`hilbot.driver.teleop.client`, but a library we call may not); shutdown
    must not hang on it, since torque goes off only once these tasks are gone.
    """
    pending = {t for t in tasks if not t.done()}
    for _ in range(attempts):
        if not pending:
            break
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=1.0)
    for task in pending:
        log.error("task %s did not stop after %d cancels; shutting down anyway", task, attempts)
    finished = [t for t in tasks if t.done()]
    return [t.exception() if not t.cancelled() else asyncio.CancelledError() for t in finished]


async def _main(
    args: argparse.Namespace, config: Any, trajectory: Any, build: Callable[..., Any]
) -> int:
    """Run the robot; 130 when Ctrl+C (SIGINT) ended a run that otherwise went well."""
    code = await _run_robot(args, config, trajectory, build)
    return EXIT_INTERRUPTED if code == 0 and args.interrupted else code


async def _run_robot(
    args: argparse.Namespace, config: Any, trajectory: Any, build: Callable[..., Any]
) -> int:
    from hilbot.driver.runtime.loop import Runtime
    from hilbot.driver.runtime.state import Command

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        args.interrupted = args.interrupted or sig == signal.SIGINT  # exits 130
        stop.set()

    args.interrupted = False
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None:
            continue
        with contextlib.suppress(NotImplementedError):  # not on Windows
            loop.add_signal_handler(sig, on_signal, sig)
    backend_options: dict[str, Any] = {"virtual_return_delay": args.virtual_return_delay or 0}
    sim_bus_args = sim_bus_options(args)
    if sim_bus_args:
        backend_options["sim_bus_args"] = sim_bus_args
    calibrated = getattr(args, "calibrated", None)
    if calibrated is not None:
        backend_options.update(calibrated.backend_options())
    if getattr(args, "scene", None) is not None:
        from hilbot.sim.mujoco_scene import load_scene

        backend_options["scene"] = args.scene_objects = load_scene(args.scene)
    status = Progress(1, enabled=not args.no_status and sys.stderr.isatty())
    async with (
        build(config, args.backend, **backend_options) as built,
        Runtime(config, watch := TorqueWatch(built)) as runtime,
        LocalStop(runtime) as local_stop,
    ):
        args.torque_watch = watch  # running: a bus failure from here on leaves a shutdown
        first = runtime.state().joints
        if calibrated is not None and first is not None:
            try:
                calibrated.check_fresh(first)  # before anything is enabled
            except DriverError as exc:
                print(f"hilbot run: {exc}", file=sys.stderr)
                return EXIT_BAD_INPUT
        if local_stop.keys_active:
            print(HINT.format(pid=os.getpid()), file=sys.stderr)
        for listener in extra_listeners(args, runtime, built):
            runtime.add_cycle_listener(listener)
        if args.enable:
            await runtime.command(Command.ENABLE)
        ending: list[asyncio.Task[Any]] = [
            asyncio.create_task(runtime.wait_stopped(), name="loop"),
            asyncio.create_task(stop.wait(), name="signal"),
        ]
        background: list[asyncio.Task[Any]] = []
        if args.duration is not None:
            ending.append(asyncio.create_task(asyncio.sleep(args.duration), name="duration"))
        if trajectory is not None:
            from hilbot.driver.runtime.trajectory import play

            player = asyncio.create_task(play(trajectory, runtime), name="trajectory")
            # Without --duration the run ends with the trajectory; with it, the robot holds.
            (background if args.duration is not None else ending).append(player)
        if not args.no_mqtt:
            args.teleop_ready = loop.create_future()
            ending.append(asyncio.create_task(_teleop(args, config, runtime), name="mqtt"))
            background.append(asyncio.create_task(_announce(args, status), name="announce"))
        if status.enabled:
            background.append(asyncio.create_task(_status_line(runtime, status), name="status"))
        if getattr(args, "dataset_recording", None) is not None:  # ends the run when done
            from hilbot.driver.dataset import options as dataset_options

            # the terminal's keys stay the local e-stop's: the episodes run timed
            recording = dataset_options.record(
                args, runtime, *args.dataset_recording, keyboard=not local_stop.keys_active
            )
            ending.append(asyncio.create_task(recording, name="dataset"))
        await asyncio.wait(ending, return_when=asyncio.FIRST_COMPLETED)
        results = await _cancel_all([*ending, *background])
        error = next(
            (
                r
                for r in results
                if isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError)
            ),
            None,
        )
        state = runtime.state()
    status.close()
    print(shutdown_text(config, watch))
    torque_left = torque_left_on(config, watch)  # says what the servos are left doing
    recorded = _save_recording(args)  # --record: written once the runtime has stopped
    if getattr(args, "live_view", None) is not None:
        args.live_view.close()
    _summary(final_state(state, watch))  # as the shutdown left it
    if args.stats is not None and not _save_stats(args.stats, state):
        recorded = False
    if error is not None:
        from hilbot.driver.teleop.errors import TeleopError

        if isinstance(error, TeleopError):  # a busy port, no broker, a refused login
            print(f"hilbot run: {error}", file=sys.stderr)
            return 2
        print(f"hilbot run: stopped by an error: {error!r}", file=sys.stderr)
        return 1
    return 0 if recorded and not torque_left else 1


def extra_listeners(
    args: argparse.Namespace, runtime: Any, backend: Any = None
) -> list[Callable[[Any], None]]:
    """Cycle listeners other options attach (``--record``: the bench recorder; ``--view``)."""
    listeners: list[Callable[[Any], None]] = []
    if getattr(args, "view", False):
        from hilbot.driver.view import start_view

        args.live_view = start_view(
            runtime,
            port=view_port(args),
            scene=getattr(args, "scene_objects", ()),
            poses=getattr(backend, "scene_poses", None),  # --backend mujoco: pushed boxes
        )
        listeners.append(args.live_view.listener)
    if getattr(args, "record", None) is None:
        return listeners
    from hilbot.driver.bench.recorder import Recorder, run_header
    from hilbot.driver.bench.stream import RecordingStream

    header = run_header(runtime, backend=args.backend, config_path=str(args.config))
    args.recorder = Recorder(runtime, header, stream=RecordingStream(args.record))
    return [*listeners, args.recorder]


def _save_recording(args: argparse.Namespace) -> bool:
    """``--record``: write the file (streamed to FILE.partial until now); False if it failed."""
    from hilbot.driver.bench.errors import RecordingError

    recorder = getattr(args, "recorder", None)
    if recorder is None:
        return True
    try:
        print(f"recorded {len(recorder.buffer)} cycles to {recorder.save(args.record)}")
    except RecordingError as exc:
        path, folder = Path(args.record), recorder.stream.folder
        cause = exc.__cause__
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else exc.reason
        kept = f"the earlier {path} is kept" if path.exists() else "no file was written"
        streamed = (
            f"; the cycles streamed during the run are in {folder} (hilbot replay {folder})"
            if folder.is_dir()
            else ""
        )
        said = f"could not write the recording {path}: {reason}; {kept}{streamed}"
        print(f"hilbot run: {said}", file=sys.stderr)
        return False
    return True


def _save_stats(path: Path, state: Any) -> bool:
    """``--stats``: write the final loop stats (atomically); False, said in one line, if not."""
    from hilbot.driver.files import write_text_atomic

    try:
        write_text_atomic(path, json.dumps(stats_dict(state), indent=2))
    except OSError as exc:
        print(f"hilbot run: could not write --stats {path}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


async def _teleop(args: argparse.Namespace, config: Any, runtime: Any) -> None:
    from hilbot.driver.teleop import serve

    await serve(
        runtime,
        config.teleop,
        args.mqtt,
        robot_name=config.name,
        demo=args.demo,
        takeover=getattr(args, "takeover", False),
        ready=getattr(args, "teleop_ready", None),
    )


async def _announce(args: argparse.Namespace, status: Progress) -> None:
    """Say once, when teleop is up, where its broker is and how to drive the robot."""
    link = await args.teleop_ready
    status.clear_line()
    print(teleop_hint(link.url, link.topics.prefix), file=sys.stderr, flush=True)


def teleop_hint(url: Any, prefix: str) -> str:
    """The line ``hilbot run`` prints when MQTT teleop is up: the broker and the next step."""
    from hilbot.driver.commands.teleop import DEFAULT_URL

    broker = "" if str(url) == DEFAULT_URL else f" --mqtt {url}"
    return (
        f"teleop: MQTT broker {url}, topics {prefix}/...; drive it from another terminal: "
        f"hilbot teleop{broker} --pattern jog (or --pattern circle)"
    )


def final_state(state: Any, watch: TorqueWatch) -> Any:
    """``state`` as the shutdown left it: an armed robot whose torque went off is disarmed.

    The runtime's snapshot is taken before its shutdown turns torque off; the summary line
    must not say ``armed`` after "shutdown: torque off" (``--stats`` keeps the loop's mode).
    """
    import dataclasses

    from hilbot.driver.runtime.safety import Mode

    if watch.torque is False and state.mode is Mode.ARMED:
        return dataclasses.replace(state, mode=Mode.DISARMED)
    return state


def status_text(state: Any) -> str:
    """One status line: mode, rate, lateness, overhead, clamps, faults."""
    s = state.stats
    faults = ", ".join(
        f.detail if f.joint is None else f"{f.joint}: {f.detail}" for f in state.faults
    )
    watchdog = " watchdog-hold" if state.watchdog_tripped else ""
    return (
        f"{state.mode.value:9s}{watchdog} {s.rate:7.1f}/{s.target_rate:.0f} Hz  "
        f"late p50 {s.lateness.p50 * 1e6:5.0f} µs p99 {s.lateness.p99 * 1e6:6.0f} µs  "
        f"overhead {s.overhead.p50 * 1e6:5.0f} µs  overruns {s.overruns}  clamps {s.clamps}  "
        f"bus errors {s.bus_errors}  faults: {faults or 'none'}"
    )


async def _status_line(runtime: Any, line: Progress) -> None:
    """Redraw the status line; log records clear it first (they never run into it)."""
    while True:
        await asyncio.sleep(STATUS_PERIOD)
        line.show(status_text(runtime.state()))


def stats_dict(state: Any) -> dict[str, Any]:
    """The final state as plain JSON-able data (for ``--stats``)."""
    s = state.stats

    def pct(p: Any) -> dict[str, float]:
        return {"p50": p.p50, "p99": p.p99, "max": p.max}

    return {
        "mode": state.mode.value,
        "target_rate": s.target_rate,
        "rate": s.rate,
        "cycles": s.cycles,
        "overruns": s.overruns,
        "lateness_s": pct(s.lateness),
        "cycle_time_s": pct(s.cycle_time),
        "overhead_s": pct(s.overhead),
        "ik_time_s": pct(s.ik_time),
        "cpu_share": s.cpu_share,
        "stages_s": dict(s.stages),
        "bus_errors": s.bus_errors,
        "ik_failures": s.ik_failures,
        "watchdog_trips": s.watchdog_trips,
        "clamps": {k.value: v for k, v in state.clamp_counts.items()},
        "faults": [f"{f.kind.value} {f.joint or ''} {f.detail}".strip() for f in state.fault_log],
        "time": time.time(),
    }


def _summary(state: Any) -> None:
    print(status_text(state))
