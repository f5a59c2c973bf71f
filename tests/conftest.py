"""A watchdog for every test: a hang ends the run with every thread's stack, never stalls CI.

pytest-timeout (``timeout`` in pyproject.toml) is the first line, but pytest-timeout and
pytest's faulthandler both disarm in ``pytest_exception_interact``, that is as soon as a
test fails. A failed asyncio test whose teardown then waits on a task that ignores
``cancel()`` (the event loop's shutdown cancels and awaits every task) would hang until
the CI job is killed, printing nothing. This timer stays armed through teardown.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Generator

import pytest

#: Seconds one test may take, setup and teardown included, before the run is aborted.
WATCHDOG_S = 420.0
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
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
