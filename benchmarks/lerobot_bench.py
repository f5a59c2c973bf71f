"""The SO-101 follower teleoperated from the SO-101 leader: LeRobot against hilbot, same work.

Every row runs two ``hilbot sim-bus`` processes, the leader's (the scripted hand waving
it, from when the client first talks) and the follower's, each with ``--log-positions``:
the buses note every goal write and every position read with their time. The client:

- ``lerobot``: LeRobot's own ``lerobot-teleoperate --robot.type=so101_follower
  --teleop.type=so101_leader --fps=R`` (in LeRobot's environment, ``--lerobot-python``);
- ``lerobot+hilbot``: the same command with ``--robot.type=hilbot`` (the plugin
  ``lerobot_robot_hilbot``), when it is installed in that environment;
- ``hilbot lead``: ``hilbot lead so101_leader --to so101_follower --rate R``, both arms on
  the real Feetech backend against the two ports (the follower's runtime at its 100 Hz).

Measured over ``--seconds`` once the follower gets goals (after a second of warm-up):

- loop rate: goal writes per second on the follower's bus;
- CPU per loop: user + system CPU time of the client's process tree and of both sim-bus
  processes ("all"), and of the client's tree alone, per goal write;
- the follower's commanded goal as its bus saw it (radians, 4096 ticks a turn): jerk RMS
  (the goal held from write to write, on a 100 Hz grid, every joint), the share of writes
  whose goal equals the previous one, and the best-fit delay: the shift of the leader's
  position (its bus's reads, interpolated) that best explains the goal (an affine fit
  per joint, 1 ms steps).

Rows are interleaved round by round; the report gives medians.

    python benchmarks/lerobot_bench.py --lerobot-python PY [--seconds 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import psutil
import yaml
from _report import load_note, write_section  # benchmarks/ is on sys.path when this runs

from hilbot.driver.runtime.config import load_config

SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
RAD_PER_TICK = 2 * math.pi / 4096
#: [ms] how long past its wire time hilbot's backend waits for a reply on these ptys (a
#: busy host schedules the virtual bus late; LeRobot's SDK waits 34 ms).
REPLY_MARGIN_MS = 30.0
ROBOTS = Path(__file__).resolve().parent.parent / "configs" / "robots"
STARTUP_S = 240.0
JERK_GRID_HZ = 100.0  # the goal's jerk is taken on this grid
MAX_DELAY_MS = 1000  # the delays searched, in 1 ms steps
PATIENT_SDK = """
import sys
from importlib.metadata import entry_points
import lerobot.motors.feetech.feetech as feetech
def patient(self, packet_length):  # LeRobot's own timeout, with 500 ms in place of 50 ms
    self.packet_start_time = self.getCurrentTime()
    self.packet_timeout = self.tx_time_per_byte * (packet_length + 3.0) + 500
feetech.patch_setPacketTimeout = patient
(script,) = entry_points(group="console_scripts", name=sys.argv[1])
sys.argv = sys.argv[1:]
sys.exit(script.load()())
"""  # LeRobot imports torch: a minute on a busy host


@dataclass(frozen=True)
class Row:
    client: str  # lerobot | lerobot+hilbot | hilbot lead
    rate: int  # [Hz]

    @property
    def name(self) -> str:
        return f"{self.client} @ {self.rate} Hz"


@dataclass
class Result:
    rate: float
    cpu_all_ms: float
    cpu_client_ms: float
    jerk: float
    cpu_all_share: float  # CPU seconds of all processes per second
    unchanged: float
    delay_ms: float
    fit_rad: float  # RMS of the goal the delayed leader leaves unexplained


@contextmanager
def sim_bus(robot: str, log: Path, *extra: str) -> Iterator[tuple[str, psutil.Process]]:
    command = [sys.executable, "-m", "hilbot", "sim-bus", robot, "--no-persist"]
    command += ["--log-positions", str(log), *extra]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            if ": /dev/" not in line:
                raise RuntimeError(f"sim-bus {robot} did not start: {line!r}")
            yield line.split()[1], psutil.Process(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def lerobot_calibration(root: Path) -> None:
    """LeRobot's calibration files for both arms: the full tick range, no offsets."""
    cal = {
        name: {"id": i + 1, "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095}
        for i, name in enumerate(SO101)
    }
    for kind, arm in (("robots", "so_follower"), ("teleoperators", "so_leader")):
        folder = root / kind / arm
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "bench.json").write_text(json.dumps(cal))


def hilbot_config(name: str, port: str, folder: Path) -> Path:
    """The shipped config of ``name`` on ``port``, waiting ``REPLY_MARGIN_MS`` for replies."""
    data = yaml.safe_load((ROBOTS / f"{name}.yaml").read_text())
    for bus in data["buses"]:
        bus["port"] = port
        bus["reply_margin_ms"] = REPLY_MARGIN_MS
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    load_config(path)  # a config hilbot takes
    return path


def client_command(row: Row, leader: str, follower: str, tmp: Path, lerobot: str) -> list[str]:
    if row.client == "hilbot lead":
        lead = hilbot_config("so101_leader", leader, tmp)
        follow = hilbot_config("so101_follower", follower, tmp)
        return [sys.executable, "-m", "hilbot", "lead", str(lead), "--to", str(follow),
                "--backend", "hardware", "--rate", str(row.rate), "--no-status"]  # fmt: skip
    # LeRobot's entry point, with its Feetech bus waiting 0.5 s for a status packet instead
    # of 50 ms: on a busy host the virtual bus answers late, and LeRobot's loop ends at the
    # first read that gets no answer (it does not retry Present_Position).
    script = ["-c", PATIENT_SDK, "lerobot-teleoperate"]
    teleop = ["--teleop.type=so101_leader", f"--teleop.port={leader}", "--teleop.id=bench"]
    if row.client == "lerobot":
        robot = ["--robot.type=so101_follower", f"--robot.port={follower}", "--robot.id=bench"]
    else:
        # hilbot's runtime on the running sim-bus, with the virtual buses' reply margins.
        robot = ["--robot.type=hilbot", "--robot.config=so101_follower", "--robot.backend=virtual",
                 f"--robot.port={follower}", "--robot.id=bench"]  # fmt: skip
    return [lerobot, *script, *robot, *teleop, f"--fps={row.rate}", "--display_data=false"]


def tree_cpu(processes: Sequence[psutil.Process]) -> float:
    """User + system CPU seconds of ``processes`` and their children now."""
    total = 0.0
    seen: set[int] = set()
    for process in processes:
        try:
            family = [process, *process.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for member in family:
            if member.pid in seen:
                continue
            seen.add(member.pid)
            try:
                times = member.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total


def read_log(path: Path, kind: str) -> tuple[np.ndarray, np.ndarray]:
    times, ticks = [], []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 8 and parts[0] == kind:
            times.append(float(parts[1]))
            ticks.append([int(p) for p in parts[2:]])
    return np.array(times), np.array(ticks, dtype=float).reshape(-1, 6) * RAD_PER_TICK


def goal_count(path: Path) -> int:
    try:
        with path.open() as log:
            return sum(1 for line in log if line.startswith("goal"))
    except FileNotFoundError:
        return 0


def jerk_rms(t: np.ndarray, q: np.ndarray, t0: float, t1: float) -> float:
    """RMS jerk [rad/s³] of the goal as the servo holds it, on one grid for every client.

    The goal is held from each write to the next (what the servo is told), sampled at
    ``JERK_GRID_HZ`` over ``[t0, t1]``, then differenced three times: a client that writes
    seldom in big steps and one that writes often in small ones are judged alike.
    """
    dt = 1.0 / JERK_GRID_HZ
    grid = np.arange(t0, t1, dt)
    held = q[np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 1)]
    jerk = np.diff(held, n=3, axis=0) / dt**3
    return float(np.sqrt(np.mean(jerk**2)))


def best_delay(
    t: np.ndarray, goal: np.ndarray, lt: np.ndarray, lead: np.ndarray
) -> tuple[float, float]:
    """The shift [s] of the leader's position that best explains the goal (affine per joint),
    and the RMS of what it leaves unexplained [rad]."""
    best, best_err, count = 0.0, math.inf, 1
    for ms in range(0, MAX_DELAY_MS + 1):
        shifted = t - ms / 1000
        inside = (shifted >= lt[0]) & (shifted <= lt[-1])
        if inside.sum() < 10:
            continue
        err = 0.0
        for j in range(goal.shape[1]):
            x = np.interp(shifted[inside], lt, lead[:, j])
            y = goal[inside, j]
            a = np.vstack([x, np.ones_like(x)]).T
            _, residual, *_ = np.linalg.lstsq(a, y, rcond=None)
            err += float(residual[0]) if residual.size else 0.0
        if err < best_err:
            best, best_err, count = ms / 1000, err, int(inside.sum()) * goal.shape[1]
    return best, math.sqrt(best_err / count)


def run_row(
    row: Row, seconds: float, lerobot: str, out: IO[str], keep: Path | None = None, round_: int = 0
) -> Result:
    with tempfile.TemporaryDirectory(prefix="lerobot-bench-") as name, ExitStack() as stack:
        tmp = Path(name)
        lerobot_calibration(tmp / "calibration")
        lead_log, follow_log = tmp / "leader.log", tmp / "follower.log"
        leader, lbus = stack.enter_context(
            sim_bus("so101_leader", lead_log, "--hand", "wave", "--hand-start", "open")
        )
        follower, fbus = stack.enter_context(sim_bus("so101_follower", follow_log))
        env = {**os.environ, "HF_LEROBOT_CALIBRATION": str(tmp / "calibration"),
               "XDG_CONFIG_HOME": str(tmp), "HF_HUB_OFFLINE": "1"}  # fmt: skip
        command = client_command(row, leader, follower, tmp, lerobot)
        client = stack.enter_context(
            subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=(tmp / "client.err").open("w"),
                env=env,
                text=True,
            )
        )
        assert client.stdin is not None
        client.stdin.write("\n" * 8)  # LeRobot: use the calibration files as they are
        client.stdin.flush()
        stack.callback(_stop, client)
        deadline = time.monotonic() + STARTUP_S
        while goal_count(follow_log) < 50:  # the log is flushed in blocks: wait for a few
            if client.poll() is not None or time.monotonic() > deadline:
                said = (tmp / "client.err").read_text()[-2000:]
                raise RuntimeError(f"{row.name}: no goals on the follower's bus: {said}")
            time.sleep(0.2)
        time.sleep(1.0)  # warm-up
        processes = [psutil.Process(client.pid)]
        cpu0_client, cpu0_buses = tree_cpu(processes), tree_cpu([lbus, fbus])
        t0 = time.monotonic()
        time.sleep(seconds)
        cpu1_client, cpu1_buses = tree_cpu(processes), tree_cpu([lbus, fbus])
        t1 = time.monotonic()
        if client.poll() is not None:  # LeRobot's loop ends at a read that got no answer
            said = (tmp / "client.err").read_text()[-300:]
            raise RuntimeError(f"{row.name}: the client ended in the window: {said}")
        stack.close()  # client, then the buses (their logs complete)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            stem = _stem(row, round_)
            for log in (lead_log, follow_log, tmp / "client.err"):
                (keep / f"{stem}-{log.name}").write_bytes(log.read_bytes())
            cpu = {"client_s": cpu1_client - cpu0_client, "buses_s": cpu1_buses - cpu0_buses}
            (keep / f"{stem}-window.json").write_text(json.dumps({"t0": t0, "t1": t1, **cpu}))
        result = measure(
            follow_log, lead_log, t0, t1, cpu1_client - cpu0_client, cpu1_buses - cpu0_buses
        )
        print(f"{row.name}: {result}", file=out, flush=True)
        return result


def _stem(row: Row, round_: int) -> str:
    return f"{row.client.replace(' ', '-')}-{row.rate}-{round_}"


def measure(
    follow_log: Path, lead_log: Path, t0: float, t1: float, client_cpu: float, buses_cpu: float
) -> Result:
    """A row's figures from its bus logs, its window and the CPU seconds spent in it."""
    gt, goal = read_log(follow_log, "goal")
    lt, lead = read_log(lead_log, "read")
    window = (gt >= t0) & (gt <= t1)
    gt, goal = gt[window], goal[window]
    n = len(gt)
    delay, fit = best_delay(gt, goal, lt, lead)
    return Result(
        rate=n / (t1 - t0),
        cpu_all_ms=(client_cpu + buses_cpu) / n * 1000,
        cpu_client_ms=client_cpu / n * 1000,
        cpu_all_share=(client_cpu + buses_cpu) / (t1 - t0),
        jerk=jerk_rms(gt, goal, gt[0], t1),
        unchanged=float(np.mean(np.all(goal[1:] == goal[:-1], axis=1))),
        delay_ms=delay * 1000,
        fit_rad=fit,
    )


def analyze(keep: Path) -> tuple[list[Row], dict[Row, list[Result]], dict[Row, int]]:
    """The rows of a run whose logs ``--keep`` kept, measured again."""
    results: dict[Row, list[Result]] = {}
    failed: dict[Row, int] = {}
    for path in sorted(keep.glob("*-window.json")) + sorted(keep.glob("*-failed")):
        stem = path.name.rsplit("-", 1)[0]  # client-rate-round
        client, rate, _ = stem.rsplit("-", 2)
        row = Row(client.replace("hilbot-lead", "hilbot lead"), int(rate))
        results.setdefault(row, [])
        if path.name.endswith("-failed"):
            failed[row] = failed.get(row, 0) + 1
            continue
        w = json.loads(path.read_text())
        files = (keep / f"{stem}-follower.log", keep / f"{stem}-leader.log")
        results[row].append(
            measure(
                *files,
                w["t0"],
                w["t1"],
                w["client_s"],
                w.get("buses_s", w.get("all_s", 0) - w["client_s"]),
            )
        )
    order = {"lerobot": 0, "lerobot+hilbot": 1, "hilbot lead": 2}
    rows = sorted(results, key=lambda r: (-r.rate if r.rate != 100 else 0, order[r.client]))
    return rows, results, failed


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def plugin_installed(lerobot: str) -> bool:
    done = subprocess.run([lerobot, "-c", "import lerobot_robot_hilbot"], capture_output=True)
    return done.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lerobot-python", help="a python with lerobot")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rates", default="60,30,100", help="loop rates [Hz], comma-separated")
    parser.add_argument("--clients", default="lerobot,lerobot+hilbot,hilbot lead")
    parser.add_argument("--keep", type=Path, help="copy each row's bus logs into this folder")
    parser.add_argument("--write", action="store_true", help="write the BENCHMARKS.md section")
    parser.add_argument("--analyze", type=Path, help="only measure again what --keep kept")
    args = parser.parse_args()
    if args.analyze is not None:
        rows, results, failed = analyze(args.analyze)
        report(rows, results, failed, args, os.getloadavg()[0])
        return
    if args.lerobot_python is None:
        parser.error("--lerobot-python is needed (a python with lerobot)")
    clients = args.clients.split(",")
    if "lerobot+hilbot" in clients and not plugin_installed(args.lerobot_python):
        print("lerobot_robot_hilbot is not installed there: no lerobot+hilbot rows", flush=True)
        clients.remove("lerobot+hilbot")
    rows = [Row(c, int(r)) for r in args.rates.split(",") for c in clients]
    load = os.getloadavg()[0]
    results: dict[Row, list[Result]] = {row: [] for row in rows}
    failed: dict[Row, int] = {}
    for round_ in range(args.rounds):
        for row in rows:
            try:
                results[row].append(
                    run_row(row, args.seconds, args.lerobot_python, sys.stdout, args.keep, round_)
                )
            except RuntimeError as exc:
                failed[row] = failed.get(row, 0) + 1
                if args.keep is not None:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    (args.keep / f"{_stem(row, round_)}-failed").write_text(str(exc))
                print(f"{row.name}: failed: {exc}", flush=True)
    report(rows, results, failed, args, load)


def report(rows: list[Row], results: dict[Row, list[Result]], failed: dict[Row, int],
           args: argparse.Namespace, load: float) -> None:  # fmt: skip
    lines = [
        f"Medians over {args.rounds} interleaved rounds of {args.seconds:g} s; CPU per loop: "
        "the client's process tree and both sim-bus processes (all), or the client's tree.",
        "",
        load_note(load, os.getloadavg()[0]),
        "",
    ]
    out = lines.append
    out(
        "| client | rate asked | runs | loop rate | CPU/loop, all processes | CPU/loop, client "
        "| CPU, all processes | goal jerk RMS | unchanged goals | best-fit delay | unexplained |"
    )
    out("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        got = results[row]
        runs = f"{len(got)} of {len(got) + failed.get(row, 0)}"
        if not got:
            out(f"| {row.client} | {row.rate} Hz | {runs} ||||||||")
            continue

        def med(field: str, got: list[Result] = got) -> float:
            return statistics.median(getattr(r, field) for r in got)

        out(
            f"| {row.client} | {row.rate} Hz | {runs} | {med('rate'):.1f} Hz "
            f"| {med('cpu_all_ms'):.2f} ms | {med('cpu_client_ms'):.2f} ms "
            f"| {med('cpu_all_share'):.0%} of a core "
            f"| {med('jerk'):,.0f} rad/s³ "
            f"| {med('unchanged'):.0%} | {med('delay_ms'):.0f} ms | {med('fit_rad'):.3f} rad |"
        )
    body = "\n".join(lines)
    if args.write:
        write_section("lerobot_bench", "SO-101 teleoperation: LeRobot against hilbot", body)
    else:
        sys.stdout.write(body + "\n")


if __name__ == "__main__":
    main()
