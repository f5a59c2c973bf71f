"""CPU share of the control cycle: today's code against an earlier commit, in the same run.

Section "cycle" of BENCHMARKS.md. Each row is a real ``hilbot run`` at 500 Hz, armed and
holding (the motion layer steps every cycle), with its MQTT teleop worker:

- ``--backend sim`` (openmanipulator_x, 5 servos): the share of one core the control
  process uses (all its threads), and its teleop worker's;
- ``--backend virtual`` (koch_v1_1_follower, 6 servos on the virtual Dynamixel bus): the
  control process (its bus thread included), and the sim-bus process serving the pty.

The earlier code is a ``git worktree`` of ``--base`` in a temporary folder, imported
through ``PYTHONPATH`` (a ``hilbot`` folder of links onto that tree, laid out as the
package is installed); today's code is imported the same way from this checkout. The
variants run interleaved, ``--repeats`` times each, and the table gives medians: the
CPU share over ``--seconds`` from ``/proc`` (after a settling second), and the lateness
and overhead the run reported itself (``--stats``). ``today (thread ticker)`` is today's
code with ``HILBOT_TICKER=thread``: the lateness of the two tickers side by side.

Usage: python benchmarks/cycle_bench.py [--seconds S] [--repeats N] [--base COMMIT]
       [--after COMMIT] [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import load_note, write_section

ROOT = Path(__file__).resolve().parent.parent
BASE = "1496444"
RATE = 500.0
TOP = ("kinematics", "hal", "sim", "driver", "configs")
SCENARIOS = {
    "sim": ("openmanipulator_x", "sim"),
    "virtual": ("koch_v1_1_follower", "virtual"),
}
TICKS = os.sysconf("SC_CLK_TCK")
NOTE = (
    "Read the lateness with the rate: a tick that comes periods late is the newest "
    "deadline that passed, with the dropped ones counted as overruns (both tickers; the "
    "timer ticker also when the scheduler held the loop up while it waited), so on a host "
    "this busy the p99 lateness is bounded near one period where the cycles are skipped."
)
WAIT = 120.0  # [s] start-up on a busy machine


def package_view(tree: Path, into: Path) -> Path:
    """A folder holding ``hilbot/`` as installed, made of links onto ``tree``'s sources.

    The root package's own files are copied, not linked: a child process (the teleop
    worker, the sim-bus) finds its ``hilbot`` from where ``hilbot/__init__.py`` really is.
    """
    package = into / "hilbot"
    package.mkdir(parents=True)
    for item in (tree / "src" / "hilbot").iterdir():
        if item.is_file():
            shutil.copy2(item, package / item.name)
    for top in TOP:
        (package / top).symlink_to(tree / top)
    return into


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, all its threads (dead ones included) [s]."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (the teleop worker, the sim-bus process)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # the thread ended
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def one_run(view: Path, scenario: str, seconds: float, env_extra: dict[str, str]) -> dict:
    robot, backend = SCENARIOS[scenario]
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        log = Path(tmp) / "stderr.txt"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HILBOT_")}
        env |= {"PYTHONPATH": str(view), "XDG_CONFIG_HOME": str(Path(tmp) / "config")}
        env |= env_extra
        args = [
            sys.executable, "-m", "hilbot", "run", robot, "--backend", backend,
            "--rate", str(RATE), "--enable", "--broker-port", "0", "--no-status",
            "--duration", str(seconds + 60), "--stats", str(stats),
        ]  # fmt: skip
        with log.open("wb") as err:
            proc = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=env,
                cwd=tmp,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + WAIT
                while "hilbot teleop --mqtt" not in log.read_text():
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"hilbot run did not start: {log.read_text()[-2000:]}")
                    time.sleep(0.1)
                time.sleep(1.0)  # the worker connects, the loop settles
                kids = children(proc.pid)
                t0, c0 = time.monotonic(), cpu_seconds(proc.pid)
                k0 = {k: cpu_seconds(k) for k in kids}
                time.sleep(seconds)
                t1, c1 = time.monotonic(), cpu_seconds(proc.pid)
                k1 = {k: cpu_seconds(k) for k in kids}
                names = {k: command_of(k) for k in kids}
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(WAIT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        span = t1 - t0
        row: dict[str, Any] = {"process": (c1 - c0) / span, "worker": 0.0, "bus": 0.0}
        for kid in kids:
            share = (k1[kid] - k0[kid]) / span
            row["bus" if "sim-bus" in names[kid] or "sim_bus" in names[kid] else "worker"] += share
        data = json.loads(stats.read_text())
        row["late_p50"] = data["lateness_s"]["p50"]
        row["late_p99"] = data["lateness_s"]["p99"]
        row["overhead_p50"] = data["overhead_s"]["p50"]
        row["rate"] = data["rate"]
        row["stages"] = data.get("stages_s", {})
        return row


def import_time(view: Path) -> tuple[float, bool]:
    """Import time of ``hilbot run --help`` [s] (-X importtime, top level) and matplotlib."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HILBOT_")}
    env["PYTHONPATH"] = str(view)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hilbot", "run", "--help"],
        capture_output=True, text=True, env=env, cwd=view,
    )  # fmt: skip
    total = 0
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)", line)
        if match:
            total += int(match[1])
    loaded = re.search(r"\| +matplotlib$", done.stderr, re.M) is not None
    return total * 1e-6, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base", default=BASE, help=f"the earlier commit (default {BASE})")
    parser.add_argument(
        "--after", help="measure this commit as today's code (default: this checkout as it is)"
    )
    parser.add_argument("--no-write", action="store_true", help="print, leave BENCHMARKS.md")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        trees = [(Path(tmp) / "base", args.base)]
        if args.after:
            trees.append((Path(tmp) / "after", args.after))
        for tree, commit in trees:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit],
                check=True, capture_output=True,
            )  # fmt: skip
        today = trees[1][0] if args.after else ROOT
        label = f"today ({args.after})" if args.after else "today"
        try:
            variants = {
                f"before ({args.base})": (package_view(trees[0][0], Path(tmp) / "v0"), {}),
                label: (package_view(today, Path(tmp) / "v1"), {}),
                f"{label}, thread ticker": (Path(tmp) / "v1", {"HILBOT_TICKER": "thread"}),
            }
            rows: dict[tuple[str, str], list[dict]] = {}
            imports: dict[str, list[tuple[float, bool]]] = {}
            for repeat in range(args.repeats):
                for scenario in SCENARIOS:
                    for name, (view, extra) in variants.items():
                        row = one_run(view, scenario, args.seconds, extra)
                        rows.setdefault((scenario, name), []).append(row)
                        print(f"[{repeat + 1}/{args.repeats}] {scenario:7s} {name:24s} "
                              f"process {row['process']:.1%} worker {row['worker']:.1%} "
                              f"bus {row['bus']:.1%} late p99 {row['late_p99'] * 1e6:.0f} µs",
                              flush=True)  # fmt: skip
                for name, (view, extra) in variants.items():
                    if not extra:
                        imports.setdefault(name, []).append(import_time(view))
        finally:
            for tree, _ in trees:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    check=False, capture_output=True,
                )  # fmt: skip
    body = report(rows, imports, args, load_start, os.getloadavg()[0])
    if args.no_write:
        print(body)
    else:
        write_section("cycle", "Control cycle: CPU share at 500 Hz, before and after (#24)", body)


def report(
    rows: dict[tuple[str, str], list[dict]],
    imports: dict[str, list[tuple[float, bool]]],
    args: argparse.Namespace,
    load_start: float,
    load_end: float,
) -> str:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    lines = [
        f"`hilbot run ROBOT --backend B --rate 500 --enable` with its MQTT teleop worker, "
        f"{args.seconds:g} s measured per row after a settling second, {args.repeats} rows "
        "per variant, interleaved; medians. CPU share: of one core, from /proc (user + "
        "system, every thread); per cycle: that share over the rate the run achieved, and "
        "at 500 Hz: the per-cycle time at the full rate (a busy host skips cycles). "
        "Lateness and overhead: the run's own `--stats` (overhead "
        f"is the CPU time per cycle in today's code, cycle minus bus I/O before). Targets: "
        "control process <= 12 % on sim, process + bus thread <= 20 % on virtual.",
        "",
        "| backend | code | control process | per cycle [µs] | at 500 Hz | teleop worker | "
        "sim-bus process | late p50 / p99 [µs] | overhead p50 [µs] | rate [Hz] |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (scenario, name), runs in rows.items():
        per_cycle = med([r["process"] / max(r["rate"], 1.0) for r in runs])
        lines.append(
            f"| {scenario} | {name} | {med([r['process'] for r in runs]):.1%} "
            f"| {per_cycle * 1e6:.0f} | {per_cycle * RATE:.1%} "
            f"| {med([r['worker'] for r in runs]):.1%} "
            f"| {med([r['bus'] for r in runs]):.1%} "
            f"| {med([r['late_p50'] for r in runs]) * 1e6:.0f} / "
            f"{med([r['late_p99'] for r in runs]) * 1e6:.0f} "
            f"| {med([r['overhead_p50'] for r in runs]) * 1e6:.0f} "
            f"| {med([r['rate'] for r in runs]):.1f} |"
        )
    stages = [
        (scenario, name, runs) for (scenario, name), runs in rows.items() if runs[0]["stages"]
    ]
    if stages:
        keys = list(stages[0][2][0]["stages"])
        lines += [
            "",
            "Today's stages, mean per cycle [µs] (`--stats` `stages_s`; wall time, "
            "`other`: the rest of the process's CPU time):",
            "",
            "| backend | code | " + " | ".join(keys) + " |",
            "|---|---|" + "---|" * len(keys),
        ]
        for scenario, name, runs in stages:
            cells = [f"{med([r['stages'].get(k, 0.0) for r in runs]) * 1e6:.0f}" for k in keys]
            lines.append(f"| {scenario} | {name} | " + " | ".join(cells) + " |")
    lines += ["", "CLI import time of `hilbot run --help` (-X importtime, top level), median:", ""]
    for name, values in imports.items():
        loaded = "loads" if any(v[1] for v in values) else "does not load"
        lines.append(f"- {name}: {med([v[0] for v in values]) * 1e3:.0f} ms, {loaded} matplotlib")
    lines += ["", NOTE, "", load_note(load_start, load_end)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
