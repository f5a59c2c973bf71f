"""Start a child Python that can load only this installed hilbot, never a folder's copy.

``python -m hilbot...`` puts the current folder first on ``sys.path``: a folder
holding a ``hilbot/`` package (an unpacked archive, a data set, the parent folder
of a clone) would then run in place of ours, and the teleop worker would hand it
the broker's password. ``-P`` prevents that only from Python 3.11 on, so a child
is started isolated (``-I``: neither the current folder nor ``PYTHON*``
variables) with a short bootstrap that sets ``sys.path`` to this process's own
(the folder this ``hilbot`` was loaded from first, the current folder left out),
imports ``hilbot``, checks it is the file this process loaded, and only then runs
the module. A mismatch ends the child with exit code :data:`EXIT_WRONG_PACKAGE`
and one line on stderr, before any of our code runs in it.

The child ignores SIGINT from the bootstrap's first line on: a Ctrl+C in the terminal
goes to the whole foreground process group, and a child still importing would end in a
``KeyboardInterrupt`` traceback. Its parent ends it on shutdown (the teleop worker
exits when its channel closes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import hilbot

#: The child's exit code when it found another ``hilbot`` than its parent's.
EXIT_WRONG_PACKAGE = 97

_BOOTSTRAP = """\
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
import json, os, sys
expected, paths, module = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
sys.path[:] = paths + [p for p in sys.path if p and p not in paths]
import hilbot
found = os.path.realpath(getattr(hilbot, "__file__", None) or "?")
if found != expected:
    sys.stderr.write(
        f"hilbot child: refusing to run {module}: it would load hilbot from {found}, "
        f"not {expected}\\n"
    )
    sys.exit(EXIT_WRONG_PACKAGE)
sys.argv[:] = [module, *sys.argv[4:]]
import runpy
runpy.run_module(module, run_name="__main__", alter_sys=True)
""".replace("EXIT_WRONG_PACKAGE", str(EXIT_WRONG_PACKAGE))


def package_file() -> str:
    """The resolved path of the ``hilbot/__init__.py`` this process loaded."""
    return os.path.realpath(hilbot.__file__ or "")


def search_path(cwd: str | None = None) -> list[str]:
    """The ``sys.path`` a child gets: our package's folder first, then ours without the cwd.

    The current folder (``""`` or its absolute path, which ``python -m`` and ``-c``
    put there) is left out, so a folder's ``hilbot/``, ``numpy/`` or ``yaml/`` never loads.
    """
    here = os.path.realpath(cwd if cwd is not None else os.getcwd())
    root = os.path.dirname(os.path.dirname(package_file()))
    paths = [root]
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or os.path.realpath(entry) == here:
            continue
        if entry not in paths:
            paths.append(entry)
    return paths


def python_command(module: str, *args: str) -> list[str]:
    """The argv that runs ``python -m module args...`` on our own ``hilbot`` only."""
    # This interpreter's own flags (-X dev, -W filters, -B ...), which -I would drop with
    # the PYTHON* variables that may have set them.
    flags: list[str] = getattr(subprocess, "_args_from_interpreter_flags", list)()
    return [
        sys.executable,
        *flags,
        "-I",
        "-c",
        _BOOTSTRAP,
        package_file(),
        json.dumps(search_path()),
        module,
        *args,
    ]


def wrong_package(report: object) -> str | None:
    """Why a child's report of its ``hilbot.__file__`` is not ours (None when it is)."""
    if report == package_file():
        return None
    return f"the child loaded hilbot from {report!r}, not {package_file()!r}"
