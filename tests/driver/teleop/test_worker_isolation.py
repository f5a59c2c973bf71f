"""The teleop worker runs only the installed hilbot, and gets the broker's login only then.

A folder holding a ``hilbot/`` package, as the current folder of ``hilbot run``, must
not take over the worker (``python -m`` would put it first on ``sys.path``); a worker
that says it loaded another hilbot is sent nothing, its credentials least of all.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from hilbot.driver.teleop import TeleopSettings
from hilbot.driver.teleop.errors import TeleopError

EVIL = """\
import os
here = os.path.dirname(os.path.abspath(__file__))
while os.path.basename(here) != "hilbot":
    here = os.path.dirname(here)
with open(os.path.join(os.path.dirname(here), "MARKER"), "w") as f:
    f.write("a folder's hilbot ran")
"""


@pytest.fixture
def hostile_cwd(tmp_path, monkeypatch):
    """A current folder holding a ``hilbot/`` package that leaves MARKER when imported."""
    folder = tmp_path / "download"
    (folder / "hilbot" / "driver" / "teleop").mkdir(parents=True)
    (folder / "hilbot" / "__init__.py").write_text(EVIL)
    for sub in ("driver", "driver/teleop"):
        (folder / "hilbot" / sub / "__init__.py").write_text(EVIL)
    (folder / "hilbot" / "driver" / "teleop" / "worker.py").write_text(EVIL)
    monkeypatch.chdir(folder)
    return folder


async def test_a_folders_hilbot_does_not_run_as_the_worker(kit, mosquitto, hostile_cwd):
    async with (
        kit.running_sim() as runtime,
        kit.serving(runtime, mosquitto.url, isolate=True) as worker,
    ):
        await kit.eventually(worker.connected.is_set, timeout=20, what="the worker connected")
    assert not (hostile_cwd / "MARKER").exists()


async def test_a_worker_that_loaded_another_hilbot_is_sent_no_credentials(
    kit, mosquitto, tmp_path, monkeypatch
):
    # A real child that says it loaded another hilbot, then records all it is sent.
    received = tmp_path / "received"
    fake = textwrap.dedent(
        f"""
        import json, socket, sys
        sock = socket.socket(fileno=int(sys.argv[1]))
        sock.sendall(json.dumps({{"hilbot": "/elsewhere/hilbot/__init__.py"}}).encode() + b"\\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        open({str(received)!r}, "wb").write(data)
        """
    )
    # The module, not the package's ``serve`` function of the same name.
    serve_module = importlib.import_module("hilbot.driver.teleop.serve")
    monkeypatch.setattr(
        serve_module, "python_command", lambda _module, fd: [sys.executable, "-c", fake, fd]
    )
    settings = TeleopSettings(
        **{**kit.fast.model_dump(), "username": "alice", "password": "s3cret-pw"}
    )
    async with kit.running_sim() as runtime:
        with pytest.raises(TeleopError, match=r"refusing the teleop worker.*elsewhere"):
            async with kit.serving(runtime, mosquitto.url, settings, isolate=True):
                pass
    await kit.eventually(received.exists, timeout=20, what="the fake worker's record")
    assert received.read_bytes() == b""
