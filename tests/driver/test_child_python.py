"""Children (the virtual bus, the teleop worker) load only the installed hilbot.

``hilbot run`` started them with ``python -m``, which puts the current folder first on
``sys.path``: a folder holding a ``hilbot/`` package took them over, and from the parent
folder of a clone (a folder ``hilbot`` without ``__init__.py``) the virtual bus failed with
``cannot import name '__version__'``.
"""

from __future__ import annotations

import json
import subprocess
import sysconfig
from pathlib import Path

import hilbot.driver
from hilbot.driver.child_python import EXIT_WRONG_PACKAGE, python_command

EVIL = """\
import os
here = os.path.dirname(os.path.abspath(__file__))
while os.path.basename(here) != "hilbot":
    here = os.path.dirname(here)
with open(os.path.join(os.path.dirname(here), "MARKER"), "w") as f:
    f.write("a folder's hilbot ran")
"""
#: The hilbot command as a user runs it: the installed script, not ``python -m``.
HILBOT = str(Path(sysconfig.get_path("scripts")) / "hilbot")
CLONE = Path(hilbot.driver.__file__).resolve().parents[1]


def hostile_folder(folder: Path) -> Path:
    """A folder holding a ``hilbot`` package (and its subpackages) that leave MARKER."""
    for sub in ("", "driver", "driver/teleop", "driver/commands", "sim"):
        (folder / "hilbot" / sub).mkdir(parents=True, exist_ok=True)
        (folder / "hilbot" / sub / "__init__.py").write_text(EVIL)
    (folder / "hilbot" / "__main__.py").write_text(EVIL)
    (folder / "hilbot" / "driver" / "teleop" / "worker.py").write_text(EVIL)
    return folder


def ran(done: subprocess.CompletedProcess[str]) -> None:
    """Assert the run started its children and ended as a run ends, with no traceback.

    On a starved host the virtual bus may miss replies and the shutdown then reports
    that torque could not be turned off (exit 1): still a run of our code.
    """
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said
    assert "shutdown: " in done.stdout, said
    assert done.returncode == 0 or "did not answer" in said or "rx timeout" in said, said


def run_virtual(cwd: Path) -> subprocess.CompletedProcess[str]:
    # The embedded broker: the run starts the teleop worker as well as the virtual bus.
    args = ["run", "--backend", "virtual", "--enable", "--duration", "1", "--no-status"]
    return subprocess.run(
        [HILBOT, *args, "--broker-port", "0"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_folders_hilbot_runs_in_no_child_of_hilbot_run(tmp_path):
    folder = hostile_folder(tmp_path / "download")
    done = run_virtual(folder)
    ran(done)
    assert not (folder / "MARKER").exists()


def test_hilbot_run_works_from_the_parent_folder_of_a_clone(tmp_path):
    (tmp_path / "hilbot").symlink_to(CLONE, target_is_directory=True)
    done = run_virtual(tmp_path)
    ran(done)


def test_a_child_that_would_load_another_hilbot_runs_nothing(tmp_path):
    argv = python_command("hilbot", "--version")
    expected = argv.index("hilbot") - 2  # the bootstrap's expected file, before sys.path
    assert argv[expected].endswith("__init__.py") and json.loads(argv[expected + 1])
    argv[expected] = str(tmp_path / "hilbot" / "__init__.py")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == EXIT_WRONG_PACKAGE
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "refusing to run hilbot" in line and "not " in line


def test_the_child_runs_from_any_folder_with_its_arguments(tmp_path):
    hostile_folder(tmp_path)
    done = subprocess.run(
        python_command("hilbot", "--version"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=True,
    )
    assert done.stdout.strip().endswith(hilbot.__version__)
    assert not (tmp_path / "MARKER").exists()
