"""Teleop payload parsing: the pydantic models against the hand-written parser they replaced.

Both parsers run in this process on the same payloads, rows interleaved and the
order of the two alternating per round; the figures are medians over rounds of
the time per ``parse`` call. The old parser is read from git (the commit before
``driver/teleop/payloads.py`` was added, or ``--baseline REV``) and imported as a
module of its own.

    python benchmarks/payload_bench.py [--rounds N] [--calls N] [--baseline REV] [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

# benchmarks/ is on sys.path when this script runs
from _report import ROOT, load_note, write_section

from hilbot.driver.teleop import messages as new_messages

PREFIX = "hilbot/omx"
TARGET = f"{PREFIX}/target/arm"
JOINTS = [f"joint{i}" for i in range(1, 7)]
STAMP = 1.764e9


def _dumps(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()  # as TeleopPublisher sends


#: (row, topic, payload, accepted): what a teleop client sends, and two rejected payloads.
ROWS: list[tuple[str, str, bytes, bool]] = [
    (
        "pose target: position + quaternion, stamped (as TeleopPublisher sends)",
        TARGET,
        _dumps(
            {
                "seq": 123456,
                "sender": "pad-3f2a",
                "position": [0.2013, -0.0412, 0.1537],
                "orientation": {"w": 0.9238, "x": 0.0, "y": 0.3827, "z": 0.0},
                "stamp": STAMP,
                "ttl": 0.5,
            }
        ),
        True,
    ),
    (
        "pose target: position {x, y, z} only",
        TARGET,
        _dumps({"seq": 123456, "position": {"x": 0.2013, "y": -0.0412, "z": 0.1537}}),
        True,
    ),
    (
        "pose target: position + roll/pitch/yaw",
        TARGET,
        _dumps(
            {
                "seq": 123456,
                "position": [0.2013, -0.0412, 0.1537],
                "orientation": {"roll": 0.1, "pitch": -0.4, "yaw": 2.0},
            }
        ),
        True,
    ),
    (
        "joint target: 6 joints, stamped",
        f"{PREFIX}/joints/target",
        _dumps(
            {
                "seq": 123456,
                "sender": "leader",
                "positions": {name: 0.1 * i for i, name in enumerate(JOINTS)},
                "stamp": STAMP,
                "ttl": 0.5,
            }
        ),
        True,
    ),
    ("command: estop", f"{PREFIX}/cmd", _dumps({"seq": 9, "command": "estop"}), True),
    ("rejected: not JSON", TARGET, b'{"seq": 1, "position": [0.2, 0', False),
    (
        "rejected: position of 2 numbers",
        TARGET,
        _dumps({"seq": 1, "position": [0.2, 0.0]}),
        False,
    ),
]


def baseline_rev() -> str:
    """The commit before the payload models were added."""
    added = subprocess.run(
        [
            "git",
            "-C",
            str(ROOT),
            "log",
            "--diff-filter=A",
            "--format=%H",
            "--",
            "driver/teleop/payloads.py",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not added:
        raise SystemExit("driver/teleop/payloads.py is not in git history: pass --baseline REV")
    parent = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", f"{added[-1]}~1"],
        capture_output=True,
        text=True,
        check=True,
    )
    return parent.stdout.strip()


def load_old(rev: str, folder: Path) -> ModuleType:
    """Import ``driver/teleop/messages.py`` as of ``rev`` under the name ``old_messages``."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:driver/teleop/messages.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = folder / "old_messages.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_messages", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_messages"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def parser(module: ModuleType, topic: str, payload: bytes, accepted: bool) -> Callable[[], None]:
    """A call of ``module.parse`` on one payload; checks once that it is accepted or not."""
    vocabulary = module.Vocabulary(PREFIX, frozenset({"arm"}), frozenset(JOINTS), 4096)
    parse, rejected = module.parse, module.MessageRejected

    def call() -> None:
        with contextlib.suppress(rejected):
            parse(topic, payload, vocabulary)

    try:
        parse(topic, payload, vocabulary)
        ok = True
    except rejected:
        ok = False
    assert ok == accepted, (module.__name__, topic, payload)
    return call


def per_call_us(call: Callable[[], None], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--rounds", type=int, default=41)
    cli.add_argument("--calls", type=int, default=2000, help="parse calls per timed block")
    cli.add_argument("--baseline", help="git revision of the old parser")
    cli.add_argument("--no-write", action="store_true", help="print only, keep BENCHMARKS.md")
    args = cli.parse_args()
    rev = args.baseline or baseline_rev()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        old = load_old(rev, Path(tmp))
        calls = {row: (parser(old, *rest), parser(new_messages, *rest)) for row, *rest in ROWS}
        times: dict[str, tuple[list[float], list[float]]] = {row: ([], []) for row in calls}
        for round_ in range(args.rounds):
            for row, (old_call, new_call) in calls.items():
                pair = [(0, old_call), (1, new_call)]
                for side, call in pair if round_ % 2 == 0 else pair[::-1]:
                    times[row][side].append(per_call_us(call, args.calls))
    load_after = os.getloadavg()[0]
    lines = [
        "| payload | hand-written parser [µs] | pydantic models [µs] | new / old |",
        "|---|---|---|---|",
    ]
    for row, (old_t, new_t) in times.items():
        o, n = statistics.median(old_t), statistics.median(new_t)
        lines.append(f"| {row} | {o:.2f} | {n:.2f} | {n / o:.2f} |")
    body = (
        f"`parse(topic, payload, vocabulary)` per call, median of {args.rounds} rounds of "
        f"{args.calls} calls, the two parsers interleaved in one process (the old one is "
        f"`driver/teleop/messages.py` at `{rev}`, read from git). Both decode with Python's "
        "`json` (which finds duplicate fields); the new one validates with the pydantic "
        "models of `driver/teleop/payloads.py` (pydantic-core, strict mode) and builds the "
        "same `PoseTarget` / `JointTarget` / `CommandMessage`. "
        f"{load_note(load_before, load_after)}\n\n" + "\n".join(lines) + "\n\n"
        "Targets and commands parse faster or as fast. A payload that is JSON but fails "
        "validation costs more than before: pydantic-core raises, `ValidationError.errors()` "
        "builds the error list, and the detail is formatted from its first entry. Bytes "
        "that are no JSON (the garbage of the flood benchmark) fail in the same decoder as "
        "before, and the error topic is rate-limited either way."
    )
    if args.no_write:
        print(body)
    else:
        write_section("payload", "Teleop payload parsing: pydantic models vs hand-written", body)


if __name__ == "__main__":
    main()
