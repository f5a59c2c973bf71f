"""The README's first screen on a stock distribution, and the Pythons hilbot supports.

- the README's install command, as written, from a copy of the checkout, with the
  distribution's own Python (Debian's /usr/bin/python3, which refuses ``pip install``
  outside a virtual environment: PEP 668), then ``hilbot run`` from it;
- every module of the package imports on the running Python (CI runs this on the oldest
  and the newest supported one);
- the test command without mosquitto: the MQTT tests skip, with one line naming the package.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
STOCK_PYTHON = Path("/usr/bin/python3")
#: The install from PyPI: about 1 min with a warm pip cache, 2 min on a busy machine.
INSTALL_S = 480
TOP_LEVEL = ("kinematics", "hal", "sim", "driver", "configs")
#: Modules that need an optional extra (their prefix), by the extra's import name.
EXTRA_MODULES = {"mujoco": "hilbot.sim.mujoco"}


def _readme_install_command() -> str:
    """The shell line of the README's "Two commands" section that installs and runs hilbot."""
    section = README.read_text(encoding="utf-8").split("## Two commands", 1)[1]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    return blocks[0].strip()


def _module_names() -> list[str]:
    names = ["hilbot"]
    for top in ("src/hilbot", *TOP_LEVEL):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT / top).with_suffix("").parts
            if "__pycache__" in parts or parts[-1] == "__main__":
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            prefix = ("hilbot",) if top == "src/hilbot" else ("hilbot", top)
            names.append(".".join(prefix + parts))
    return sorted(set(names))


def _python_version(python: Path) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [str(python), "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    major, minor = out.split()
    return int(major), int(minor)


def test_the_readme_install_command_is_the_script():
    command = _readme_install_command()
    assert command.startswith("scripts/install && . .venv/bin/activate && hilbot run"), command
    assert (ROOT / "scripts" / "install").stat().st_mode & 0o111


def test_every_module_imports_on_this_python():
    # In a child: a module that fails to import (a name Python 3.11 added, a syntax 3.10
    # lacks) fails here with its name, whatever other tests imported before.
    missing = [extra for extra in EXTRA_MODULES if importlib.util.find_spec(extra) is None]
    names = [
        n
        for n in _module_names()
        if not any(n.startswith(EXTRA_MODULES[extra]) for extra in missing)
    ]
    script = (
        "import importlib, sys\n"
        "bad = []\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *names],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT.parent,  # not the checkout: the installed package, as a user has it
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "", f"on Python {sys.version.split()[0]}:\n{done.stdout}"
    assert len(names) > 200  # the walk found the package


def test_without_mosquitto_the_mqtt_tests_skip_with_one_line():
    env = {**os.environ, "HILBOT_TEST_MOSQUITTO": "/nonexistent/mosquitto"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests/driver/teleop/test_client.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-2000:]
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1, out[-3000:]
    assert "sudo apt-get install -y mosquitto" in skipped[0]
    assert re.search(r"\b\d+ skipped\b", out) and " passed" not in out and "error" not in out


def _copy_checkout(to: Path) -> None:
    """The files a clone has (tracked, and new ones not ignored), without .venv or builds."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        source = ROOT / raw.decode()
        if not source.is_file():  # deleted in the work tree
            continue
        target = to / raw.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _running_hilbot(session: int) -> int | None:
    """The pid of a ``hilbot`` process in the session ``session`` (Linux /proc), if any."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, session, ...
        if int(fields[3]) == session and any(arg.endswith(b"/hilbot") for arg in command):
            return int(entry.name)
    return None


@pytest.mark.slow
@pytest.mark.timeout(INSTALL_S + 120)
def test_the_readme_commands_work_with_the_stock_debian_python(tmp_path):
    if _python_version(STOCK_PYTHON) is None:
        pytest.skip(f"no {STOCK_PYTHON} (the distribution's Python) on this machine")
    if shutil.which("git") is None:
        pytest.skip("needs git, to copy the checkout as a clone has it")
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 1883)) == 0:
            pytest.skip("127.0.0.1:1883, the README command's embedded broker port, is taken")
    checkout = tmp_path / "hilbot"
    _copy_checkout(checkout)
    # A user's shell: the distribution's python3 first on PATH, no virtual environment.
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYENV_VERSION")
    }
    env["PATH"] = f"{STOCK_PYTHON.parent}:/bin:/usr/sbin:/sbin"
    log = tmp_path / "out.txt"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", _readme_install_command()],
            cwd=checkout,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its processes are found by session, and killed with it
        )
    try:
        deadline = time.monotonic() + INSTALL_S
        while proc.poll() is None and time.monotonic() < deadline:
            if _running_hilbot(session=proc.pid) is not None:
                break
            time.sleep(0.5)
        assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
        hilbot = _running_hilbot(session=proc.pid)
        assert hilbot is not None, log.read_text(errors="replace")[-4000:]
        time.sleep(5)  # it runs a while, as for a user
        assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
        os.kill(hilbot, signal.SIGTERM)  # it stops as on Ctrl+C
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]
    assert "torque off" in text and " Hz" in text, text[-4000:]  # its shutdown and status
    assert "externally-managed-environment" not in text
    venv_python = checkout / ".venv" / "bin" / "python"
    assert _python_version(venv_python) == _python_version(STOCK_PYTHON)
    assert (checkout / ".venv" / "bin" / "hilbot").exists()
