"""The live view in a real browser: hilbot run --view, rendered by headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("viser", reason="the view extra is not installed")
pytest.importorskip("mujoco", reason="the mujoco extra is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package")
WIDTH, HEIGHT = 800, 600


def screenshot(url: str, out: Path, budget_ms: int = 8000) -> np.ndarray:
    """Render ``url`` in headless Chromium (software WebGL) and return the RGB pixels.

    A Chromium that hangs (seen once in many runs with two CPU hogs: its virtual time
    stopped advancing on the live page) is killed and started once more with a fresh
    profile; the pixels are judged the same either way.
    """
    import matplotlib.image

    try:
        _render(url, out, budget_ms)
    except subprocess.TimeoutExpired:
        _render(url, out, budget_ms)
    return np.asarray(matplotlib.image.imread(out))[..., :3]


def _render(url: str, out: Path, budget_ms: int) -> None:
    with tempfile.TemporaryDirectory(prefix="hilbot-chromium-") as profile:
        subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--use-gl=swiftshader",
                "--enable-unsafe-swiftshader",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                f"--window-size={WIDTH},{HEIGHT}",
                # virtual time runs the page's timers and frames until they are idle or
                # the budget is spent: the websocket scene has arrived and been drawn
                f"--virtual-time-budget={budget_ms}",
                f"--screenshot={out}",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=180,  # a render took 5 s idle; a hung one never ends
        )


def scene_region(pixels: np.ndarray) -> np.ndarray:
    """The 3D canvas without viser's panels (a notice top left, the GUI panel on the right)."""
    return pixels[160:, : int(0.56 * pixels.shape[1])]


def blue(pixels: np.ndarray) -> int:
    """Pixels of the measured robot's colour (blue well above red)."""
    return int(np.count_nonzero(pixels[..., 2] - pixels[..., 0] > 0.25))


@pytest.fixture
def empty_page():
    """A viser page with the view's empty stage (grid, camera) for the same robot."""
    from hilbot.driver.config import load_config
    from hilbot.driver.validation import load_robot
    from hilbot.driver.view.scene import stage
    from hilbot.driver.view.server import open_server

    server = open_server("127.0.0.1", 0)
    stage(server, load_robot(load_config("openmanipulator_x").urdf))
    yield f"http://127.0.0.1:{server.get_port()}"
    server.stop()


@pytest.fixture
def running_view():
    """``hilbot run openmanipulator_x --backend mujoco --enable --view``; yields its URL."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hilbot",
            "run",
            "openmanipulator_x",
            "--backend",
            "mujoco",
            "--enable",
            "--no-mqtt",
            "--no-status",
            "--view",
            "--view-port",
            "0",
            "--duration",
            "300",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    url = None
    deadline = time.monotonic() + 120
    assert proc.stdout is not None
    while url is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        match = re.match(r"view: (http://\S+)", line)
        if match:
            url = match.group(1)
    try:
        assert url is not None, proc.stderr.read() if proc.poll() is not None else "no URL"
        yield url, proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.timeout(1200)  # up to three renders, each possibly started twice
def test_the_robot_is_drawn_in_a_real_browser(running_view, empty_page, tmp_path):
    url, proc = running_view
    empty = scene_region(screenshot(empty_page, tmp_path / "empty.png"))
    shot = screenshot(url, tmp_path / "view.png")
    if blue(scene_region(shot)) < blue(empty) + 200:  # a loaded machine: more time, once
        shot = screenshot(url, tmp_path / "view.png", budget_ms=20000)
    region = scene_region(shot)
    changed = np.count_nonzero(np.max(np.abs(region - empty), axis=-1) > 0.15)
    assert changed > 1000, f"only {changed} pixels differ from the empty scene"
    assert blue(region) > blue(empty) + 200  # (the axes widget in a corner is blue too)
    assert proc.poll() is None  # the run is still going
    if os.environ.get("HILBOT_VIEW_SCREENSHOT"):  # how docs/img/view.png is made
        shutil.copy(tmp_path / "view.png", os.environ["HILBOT_VIEW_SCREENSHOT"])
