"""Every module imports where the POSIX-only modules are missing (Windows), and a sim run works.

A subprocess blocks ``termios``, ``tty``, ``pty``, ``fcntl``, ``resource``, ``grp`` and
``pwd`` (``sys.modules[name] = None``: ``import termios`` then raises ``ImportError``, as
on Windows) before it imports anything of hilbot, then imports every module of the
installed package, runs ``hilbot run`` on the sim and MuJoCo backends, and checks that
the POSIX-only features (``hilbot sim-bus``'s ptys, ``hilbot teleop``'s keyboard jog)
say so in one line.

One third-party module is imported before the block: pyserial. It picks its
implementation by platform when it is imported (``serial.serialwin32`` on Windows,
``serial.serialposix`` here, which needs ``termios`` and ``fcntl``), so importing it
first stands in for the Windows pyserial; hilbot's own imports are all checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

BLOCKED = ("termios", "tty", "pty", "fcntl", "resource", "grp", "pwd")

#: ``hilbot``'s subpackages (setup.py's folders). An editable install maps them from the
#: repository's top-level folders, outside ``hilbot.__path__``, so each is walked itself.
SUBPACKAGES = ("kinematics", "hal", "sim", "driver", "configs")

SCRIPT = textwrap.dedent(
    """
    import contextlib, importlib, importlib.util, io, json, pkgutil, sys

    import serial  # the platform's pyserial (see the test module's docstring)

    for name in {blocked!r}:
        sys.modules[name] = None

    import hilbot

    failed = {{}}

    def note(name):
        failed[name] = repr(sys.exc_info()[1])

    def walk(name):
        try:
            package = importlib.import_module(name)
        except Exception:
            note(name)
            return [name]
        found = [name]
        for info in pkgutil.walk_packages(package.__path__, name + ".", onerror=note):
            found.append(info.name)
        return found

    names = []
    # hilbot.__main__ is the only module not imported: importing it runs the command
    # line (it is ``python -m hilbot``); the run below calls the same main().
    for root in ["hilbot", *("hilbot." + sub for sub in {subpackages!r})]:
        for name in walk(root):
            if name != "hilbot.__main__" and name not in names:
                names.append(name)
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed[name] = repr(exc)

    from hilbot.driver.cli import main

    run_code = main(["run", "--backend", "sim", "--duration", "1", "--no-mqtt", "--no-status"])
    mujoco_code = None  # the mujoco extra is optional
    if importlib.util.find_spec("mujoco") is not None:
        mujoco_code = main(
            ["run", "--backend", "mujoco", "--duration", "1", "--no-mqtt", "--no-status"]
        )
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        sim_bus_code = main(["sim-bus", "--servo", "1:XM430-W350", "--duration", "0.1"])

    import asyncio
    from hilbot.driver.teleop.publisher import jog

    try:
        asyncio.run(jog(None, "arm"))  # fails before it needs a publisher
        jog_error = ""
    except RuntimeError as exc:
        jog_error = str(exc)
    print(json.dumps({{
        "imported": names,
        "failed": failed,
        "run": run_code,
        "mujoco": mujoco_code,
        "sim_bus": [sim_bus_code, err.getvalue()],
        "jog": jog_error,
    }}))
    """
).format(blocked=BLOCKED, subpackages=SUBPACKAGES)


def run_without_posix_modules() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_package_imports_and_runs_without_posix_only_modules():
    result = run_without_posix_modules()
    imported = result["imported"]
    assert isinstance(imported, list)
    # the walk reached the modules that used to import termios/tty at module level
    for name in ("hilbot.hal.bus.port", "hilbot.sim.pty_server"):
        assert name in imported
    assert len(imported) > 150
    assert result["failed"] == {}
    assert result["run"] == 0
    assert result["mujoco"] in (0, None)  # None: the mujoco extra is not installed
    code, err = result["sim_bus"]
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0] == (
        "hilbot sim-bus: the virtual buses need pseudo-terminals (POSIX); "
        f"not available on {sys.platform}"
    )
    assert result["jog"] == (
        f"keyboard jogging needs a POSIX terminal (termios); not available on {sys.platform}"
    )
