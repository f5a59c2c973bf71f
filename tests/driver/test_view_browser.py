"""The live view in a real browser: hilbot run --view, rendered by headless Chromium."""

from __future__ import annotations

import base64
import contextlib
import io
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("viser", reason="the view extra is not installed")
pytest.importorskip("mujoco", reason="the mujoco extra is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:  # one line for the whole file under pytest -ra
    pytest.skip("needs Chromium: sudo apt-get install -y chromium", allow_module_level=True)
WIDTH, HEIGHT = 800, 600
STARTUP_S = 120.0  # a page showed in about 1 s idle; a loaded machine is given far more
DRAW_S = 180.0  # the scene was drawn 1-2 s after the page showed, idle

websockets_sync = pytest.importorskip("websockets.sync.client")  # viser's dependency
connect = websockets_sync.connect
ClientConnection = websockets_sync.ClientConnection


class Chromium:
    """Headless Chromium (software WebGL) showing one page, screenshotted over DevTools.

    The page is shot in real time, as often as asked, until the test has what it waits
    for: a virtual-time budget (``--screenshot``) let virtual time run out before the
    websocket scene arrived when the machine was loaded, as it fast-forwards while the
    page waits on the network.
    """

    def __init__(self, url: str, profile: Path) -> None:
        self._proc = subprocess.Popen(
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
                "--remote-debugging-port=0",
                url,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its helper processes too end with it (close)
        )
        self._page = self._connect(profile / "DevToolsActivePort")
        self._next_id = 0
        # the viewport itself (--window-size counts the window's frame in new headless)
        size = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
        self._call("Emulation.setDeviceMetricsOverride", size)

    def _connect(self, port_file: Path) -> ClientConnection:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            assert self._proc.poll() is None, f"chromium exited with {self._proc.returncode}"
            if port_file.exists() and (lines := port_file.read_text().split()):
                with urllib.request.urlopen(f"http://127.0.0.1:{lines[0]}/json/list") as reply:
                    pages = [t for t in json.load(reply) if t["type"] == "page"]
                if pages:
                    return connect(pages[0]["webSocketDebuggerUrl"], max_size=None)
            time.sleep(0.2)
        raise AssertionError(f"chromium showed no page within {STARTUP_S} s")

    def _call(self, method: str, params: dict[str, object]) -> dict[str, object]:
        """One DevTools command; its result."""
        self._next_id += 1
        self._page.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        reply = json.loads(self._page.recv(timeout=STARTUP_S))
        while reply.get("id") != self._next_id:  # an event the page sent in between
            reply = json.loads(self._page.recv(timeout=STARTUP_S))
        assert "error" not in reply, f"{method}: {reply['error']}"
        result: dict[str, object] = reply["result"]
        return result

    def shot(self) -> np.ndarray:
        """The page's pixels now, RGB in [0, 1]."""
        import matplotlib.image

        png = base64.b64decode(str(self._call("Page.captureScreenshot", {})["data"]))
        return np.asarray(matplotlib.image.imread(io.BytesIO(png), format="png"))[..., :3]

    def shot_until(self, drawn: Callable[[np.ndarray], bool], seconds: float) -> np.ndarray:
        """Shots once a second until ``drawn`` holds or ``seconds`` pass; the last one."""
        deadline = time.monotonic() + seconds
        pixels = self.shot()
        while not drawn(pixels) and time.monotonic() < deadline:
            time.sleep(1.0)
            pixels = self.shot()
        return pixels

    def close(self) -> None:
        self._page.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGTERM)  # the browser and its helpers
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()


@contextlib.contextmanager
def chromium(url: str) -> Iterator[Chromium]:
    # Chromium's helper processes may still write to the profile as it is removed.
    with tempfile.TemporaryDirectory(
        prefix="hilbot-chromium-", ignore_cleanup_errors=True
    ) as profile:
        browser = Chromium(url, Path(profile))
        try:
            yield browser
        finally:
            browser.close()


def scene_region(pixels: np.ndarray) -> np.ndarray:
    """The 3D canvas without viser's panels (a notice top left, the GUI panel on the right)."""
    return pixels[160:, : int(0.56 * pixels.shape[1])]


def blue(pixels: np.ndarray) -> int:
    """Pixels of the measured robot's colour (blue well above red)."""
    return int(np.count_nonzero(pixels[..., 2] - pixels[..., 0] > 0.25))


@pytest.fixture
def empty_page():
    """A viser page with the view's empty stage (grid, camera) for the same robot."""
    from hilbot.driver.runtime.config import load_config
    from hilbot.driver.runtime.validation import load_robot
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


@pytest.mark.timeout(900)
def test_the_robot_is_drawn_in_a_real_browser(running_view, empty_page, tmp_path):
    url, proc = running_view
    with chromium(empty_page) as browser:
        # the empty stage is drawn once three shots a second apart agree and show the grid
        before = [browser.shot()]

        def settled(pixels: np.ndarray) -> bool:
            before.append(pixels)
            last = before[-3:]
            moved = [np.max(np.abs(a - b), axis=-1) > 0.15 for a, b in itertools.pairwise(last)]
            grid = scene_region(pixels).std() > 0.02  # blank, it is 0; drawn, 0.05
            return len(moved) == 2 and sum(map(np.count_nonzero, moved)) < 100 and grid

        empty = scene_region(browser.shot_until(settled, DRAW_S))
    with chromium(url) as browser:

        def robot_drawn(pixels: np.ndarray) -> bool:
            return blue(scene_region(pixels)) > blue(empty) + 200

        shot = browser.shot_until(robot_drawn, DRAW_S)
    import matplotlib.image

    matplotlib.image.imsave(tmp_path / "view.png", shot)
    region = scene_region(shot)
    changed = np.count_nonzero(np.max(np.abs(region - empty), axis=-1) > 0.15)
    assert changed > 1000, f"only {changed} pixels differ from the empty scene"
    assert blue(region) > blue(empty) + 200  # (the axes widget in a corner is blue too)
    assert proc.poll() is None  # the run is still going
    if os.environ.get("HILBOT_VIEW_SCREENSHOT"):  # how docs/img/view.png is made
        shutil.copy(tmp_path / "view.png", os.environ["HILBOT_VIEW_SCREENSHOT"])
