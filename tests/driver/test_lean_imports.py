"""``hilbot run``, ``lead`` and ``teleop`` never import matplotlib (nor the bench's plots).

matplotlib was 73 % of the command line's import time, loaded only because the status
line lived in ``driver/bench/`` and the bench package imported its plots. The commands
run here for real, each in a child process that says at exit what it had imported.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WAIT = 120.0  # [s] start-up on a busy machine
#: Runs the command line with the given arguments; at exit says whether matplotlib or the
#: bench's plotting modules were imported.
CHILD = (
    "import atexit, sys\n"
    "def said():\n"
    "    heavy = sorted(m for m in sys.modules if m == 'matplotlib'"
    " or m in ('hilbot.driver.bench.plots', 'hilbot.driver.bench.compare'))\n"
    "    print('HEAVY-IMPORTS', heavy or 'none', file=sys.stderr, flush=True)\n"
    "atexit.register(said)\n"
    "from hilbot.driver.cli import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def _argv(*args: str) -> list[str]:
    return [sys.executable, "-c", CHILD, *args]


def _env(tmp_path: Path) -> dict[str, str]:
    # a config folder of its own: no calibration file of the user's applies
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HILBOT_MQTT_")}
    return {**environment, "XDG_CONFIG_HOME": str(tmp_path / "config")}


def _heavy(stderr: str) -> str:
    found = re.findall(r"^HEAVY-IMPORTS (.*)$", stderr, re.MULTILINE)
    assert found, f"the child did not say what it imported: {stderr}"
    return found[-1]


def _wait_for(text: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + WAIT
    while text not in log.read_text():
        if proc.poll() is not None:
            pytest.fail(f"hilbot run exited ({proc.returncode}) before {text!r}: {log.read_text()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {text!r} within {WAIT} s: {log.read_text()}")
        time.sleep(0.05)


def test_run_and_teleop_against_it_import_no_matplotlib(tmp_path: Path) -> None:
    log = tmp_path / "run.txt"
    env = _env(tmp_path)
    run = ["run", "--backend", "sim", "--broker-port", "0", "--no-status", "--duration", "120"]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            _argv(*run), stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=env
        )
        try:
            _wait_for("hilbot teleop --mqtt", proc, log)
            url = re.search(r"hilbot teleop --mqtt (\S+)", log.read_text())
            assert url is not None, log.read_text()
            teleop = subprocess.run(
                _argv("teleop", "--mqtt", url[1], "--pattern", "circle", "--duration", "1"),
                capture_output=True,
                text=True,
                timeout=WAIT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(WAIT)
    assert teleop.returncode == 0, teleop.stderr
    assert _heavy(teleop.stderr) == "none"
    assert proc.returncode == 0, log.read_text()  # the run ended as asked, shutdown and all
    assert _heavy(log.read_text()) == "none"


def test_lead_imports_no_matplotlib(tmp_path: Path) -> None:
    done = subprocess.run(
        _argv(
            "lead", "koch_v1_1_leader", "--backend", "virtual", "--demo", "wave",
            "--duration", "1", "--no-status",
        ),
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        env=_env(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "follower armed" in done.stdout
    assert _heavy(done.stderr) == "none"


def test_the_bench_package_loads_its_plots_only_when_asked() -> None:
    code = (
        "import sys\n"
        "import hilbot.driver.bench as bench\n"
        "from hilbot.driver.bench.errors import RecordingError\n"
        "assert 'matplotlib' not in sys.modules\n"
        "assert bench.RecordingError is RecordingError\n"
        "assert 'matplotlib' not in sys.modules\n"
        "assert callable(bench.plot_comparison) and 'matplotlib' in sys.modules\n"
        "assert 'write_outputs' in dir(bench)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
