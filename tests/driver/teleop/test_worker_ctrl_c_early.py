"""Ctrl+C in the first seconds of ``hilbot run``: the teleop worker, still importing, prints
no traceback.

A terminal's Ctrl+C signals the whole foreground process group, the worker child too. The
test starts ``hilbot run`` (sim backend, embedded broker) in a process group of its own,
waits for the worker child to appear, and signals the group while the worker imports.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

WORKER = b"hilbot.driver.teleop.worker"


def worker_of(parent: int) -> int | None:
    """The pid of ``parent``'s teleop worker child, once it exists."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            if ppid == parent:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if WORKER in cmdline.read():
                        return int(entry)
        except (OSError, ValueError, IndexError):
            continue
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_while_the_teleop_worker_imports_exits_130_without_a_traceback(tmp_path):
    command = ["run", "--backend", "sim", "--broker-port", "0", "--no-status"]
    process = subprocess.Popen(
        [sys.executable, "-m", "hilbot", *command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        start_new_session=True,  # a process group of its own, as a shell's foreground job
    )
    try:
        deadline = time.monotonic() + 60  # a busy host imports the CLI slowly
        while (worker := worker_of(process.pid)) is None:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no teleop worker within 60 s"
            time.sleep(0.01)
        # Past the interpreter's own start-up, into the bootstrap and the worker's imports
        # (about 2 s on a busy 2-core host): the Ctrl+C reaches it there.
        time.sleep(0.3)
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    stderr = err.decode()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    deadline = time.monotonic() + 10  # the worker ends with its parent (init reaps it)
    while os.path.exists(f"/proc/{worker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{worker}"), "the teleop worker outlived its parent"
