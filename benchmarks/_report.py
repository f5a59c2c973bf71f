"""Write one benchmark's section of BENCHMARKS.md, leaving the other sections alone."""

from __future__ import annotations

import fcntl
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "BENCHMARKS.md"
HEADER = (
    "# Benchmarks\n\n"
    "Each section is written by the script it names; re-run the command to refresh it.\n"
    "Machines here are shared and noisy: figures are medians, and comparisons are ratios\n"
    "against peers measured in the same run.\n"
)


def machine() -> str:
    """One line describing this machine (CPU model, cores, Python, numpy)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy as np

    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"numpy {np.__version__}, {platform.system()} {platform.release()}"
    )


def load_note(start: float, end: float) -> str:
    """How busy the machine was: the 1-minute load averages at a run's start and end."""
    cores = os.cpu_count() or 1
    busy = max(start, end) >= 0.5 * cores
    what = "shared with other busy jobs" if busy else "quiet (no other job of ours running)"
    return (
        f"The machine was {what}: 1-minute load average {start:.1f} at the start, "
        f"{end:.1f} at the end, on {cores} cores. Read the ratios to the peers of the same "
        "run, not the absolute figures."
    )


def command() -> str:
    """The command line that ran this script, relative to the repository."""
    script = Path(sys.argv[0]).resolve()
    try:
        script_s = str(script.relative_to(ROOT))
    except ValueError:
        script_s = script.name
    return shlex.join(["python", script_s, *sys.argv[1:]])


def git_rev() -> str:
    """Short commit of the tree measured (with ``+dirty`` when it has changes)."""
    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty=+dirty"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "unknown"
    return rev


def write_section(name: str, title: str, body: str) -> None:
    """Replace (or append) the section ``name`` of BENCHMARKS.md with ``body``.

    The section records the command, the machine and the commit beside the figures.
    """
    block = (
        f"<!-- BEGIN {name} -->\n## {title}\n\n"
        f"- command: `{command()}`\n- machine: {machine()}\n- commit: {git_rev()}\n\n"
        f"{body.rstrip()}\n<!-- END {name} -->\n"
    )
    with open(REPORT.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = REPORT.read_text() if REPORT.exists() else HEADER
        pattern = re.compile(
            rf"<!-- BEGIN {re.escape(name)} -->.*?<!-- END {re.escape(name)} -->\n", re.S
        )
        if pattern.search(text):
            text = pattern.sub(lambda _m: block, text)
        else:
            text = text.rstrip() + "\n\n" + block
        REPORT.write_text(text)
    print(block)
