"""``hilbot run --backend virtual`` killed outright leaves no virtual bus behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is missing


def _on_a_pty(pid: int) -> bool:
    """Whether process ``pid`` has a pseudo-terminal open past its standard streams: the
    virtual bus's port, opened once the bus is up and has told the run its name."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        if int(fd.name) > 2:
            try:
                if os.readlink(fd).startswith("/dev/pts/"):
                    return True
            except OSError:  # closed meanwhile
                continue
    return False


def _folder(pid: int) -> Path:
    """The config folder on the bus's command line (``hilbot sim-bus <folder>/<robot>.yaml``)."""
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    config = next(a for a in args if a.endswith(b".yaml"))
    return Path(os.fsdecode(config)).parent


def test_a_killed_run_takes_its_virtual_bus_with_it() -> None:
    run = subprocess.Popen(
        [sys.executable, "-m", "hilbot", "run", "openmanipulator_x", "--backend", "virtual",
         "--no-mqtt", "--no-status", "--duration", "300"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120  # idle: the bus is up in about 2 s
        bus = None
        while bus is None and time.monotonic() < deadline:
            assert run.poll() is None, run.stderr.read() if run.stderr else ""
            kids = [
                c
                for c in _children(run.pid)
                if b"sim-bus" in Path(f"/proc/{c}/cmdline").read_bytes()
            ]
            bus = kids[0] if kids else None
            time.sleep(0.2)
        assert bus is not None, "no virtual bus started"
        folder = _folder(bus)
        assert folder.is_dir()
        # The bus process shows long before it serves (its start-up takes seconds on a busy
        # host): wait for the run to have opened its port, then let the runtime cycle on it.
        while not _on_a_pty(run.pid):
            assert run.poll() is None, run.stderr.read() if run.stderr else ""
            assert time.monotonic() < deadline, "the run never opened the virtual bus's port"
            time.sleep(0.1)
        time.sleep(1.0)  # the runtime is up and cycling on it
        run.send_signal(signal.SIGKILL)
        run.wait()
        # The bus notices within its poll (0.5 s); a loaded machine gets far more time.
        deadline = time.monotonic() + 60
        while _alive(bus) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(bus), "the virtual bus outlived the run that started it"
        assert not folder.exists()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if run.stderr is not None:
            run.stderr.close()
