"""The run's isolation, a watchdog for every test, and the quiet CPU some tests need.

Isolation: the hilbot folders (config, state) of each test process are its own.

Quiet CPU: scripts/test runs the suite on two pytest-xdist workers. A test marked
``quiet_cpu`` runs alone: it waits until the other worker's current test has ended, and
that worker starts no test until it is done (a readers-writer lock on a file of the run).

Watchdog: a hang ends the run with every thread's stack, never stalls CI.

pytest-timeout (``timeout`` in pyproject.toml) is the first line, but pytest-timeout and
pytest's faulthandler both disarm in ``pytest_exception_interact``, that is as soon as a
test fails. A failed asyncio test whose teardown then waits on a task that ignores
``cancel()`` (the event loop's shutdown cancels and awaits every task) would hang until
the CI job is killed, printing nothing. This timer stays armed through teardown.
"""

from __future__ import annotations

import contextlib
import faulthandler
import fcntl
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

#: Seconds one test may take, setup and teardown included, before the run is aborted.
WATCHDOG_S = 420.0
#: A folder of the whole run, which its pytest-xdist workers share (the quiet CPU's lock).
RUN_DIR_ENV = "HILBOT_TEST_RUN_DIR"
_CONFIG_HOME: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """The suite never reads or writes the user's hilbot folder (calibrations live there).

    ``XDG_CONFIG_HOME`` points at an empty folder of the run's own, so a calibration
    someone made by hand (``hilbot calibrate ... --demo`` writes one) cannot change what
    a test sees; the processes the tests start inherit it. A test that needs a folder of
    its own still sets one.
    """
    home = tempfile.mkdtemp(prefix="hilbot-test-config-")
    _CONFIG_HOME.append(home)
    os.environ["XDG_CONFIG_HOME"] = home
    # Likewise the state folder, where ``hilbot sim-bus`` keeps its servos' EEPROM.
    state = tempfile.mkdtemp(prefix="hilbot-test-state-")
    _CONFIG_HOME.append(state)
    os.environ["XDG_STATE_HOME"] = state
    if not hasattr(config, "workerinput"):  # the run's own: its pytest-xdist workers inherit it
        run = tempfile.mkdtemp(prefix="hilbot-test-run-")
        _CONFIG_HOME.append(run)
        os.environ[RUN_DIR_ENV] = run


@pytest.fixture(autouse=True)
def _fresh_virtual_eeprom(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's virtual buses start factory-fresh: EEPROM kept by ``hilbot sim-bus`` in
    one test (ids, offsets a calibration wrote) is not what the next one finds. The
    folder is made only when a bus saves into it."""
    import uuid

    base = os.environ.get("XDG_STATE_HOME") or tempfile.gettempdir()
    monkeypatch.setenv("HILBOT_STATE_DIR", os.path.join(base, "eeprom", uuid.uuid4().hex))


def pytest_unconfigure(config: pytest.Config) -> None:
    for home in _CONFIG_HOME:
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def _cpu_turn(config: pytest.Config, quiet: bool) -> Iterator[None]:
    """In a pytest-xdist worker: hold the run's CPU lock, shared, or alone when ``quiet``.

    A worker passes a turnstile before taking the lock shared, and a quiet test holds the
    turnstile while it waits for the lock: the other worker cannot slip test after test in
    ahead of it. (A pytest that a test runs inherits the worker's environment, but it is
    no worker: it takes no lock, which its parent test holds already.)
    """
    run = os.environ.get(RUN_DIR_ENV)
    if not hasattr(config, "workerinput") or not run:
        yield
        return
    folder = Path(run)
    with (folder / "turnstile.lock").open("a") as turnstile, (folder / "cpu.lock").open("a") as cpu:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if not quiet:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        fcntl.flock(cpu, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        yield  # closing the files releases both locks


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    with _cpu_turn(item.config, item.get_closest_marker("quiet_cpu") is not None):
        yield from _watched(item)


def _watched(item: pytest.Item) -> Generator[None]:
    def abort() -> None:
        capture = item.config.pluginmanager.getplugin("capturemanager")
        if capture is not None:  # give the real stderr back, as pytest-timeout does
            capture.suspend_global_capture(in_=True)
        stream = sys.__stderr__
        assert stream is not None
        print(
            f"\nwatchdog: {item.nodeid} still running after {WATCHDOG_S:.0f} s "
            "(setup, call and teardown); aborting the run. Every thread's stack:",
            file=stream,
            flush=True,
        )
        faulthandler.dump_traceback(file=stream, all_threads=True)
        os._exit(70)

    timer = threading.Timer(WATCHDOG_S, abort)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
