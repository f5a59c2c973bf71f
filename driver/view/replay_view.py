"""``ReplayView``: a recording in the browser, with a time slider.

The robot at the recorded measured joint positions, the ghost at the recorded command,
the chains' recorded pose targets, mode and hardware errors, at the slider's time. A
play checkbox runs the recording forward at its own speed.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from hilbot.driver.view.scene import ChainView, Frame, RobotScene
from hilbot.driver.view.server import open_server
from hilbot.kinematics import Robot

#: [Hz] frames while playing.
PLAY_RATE_HZ = 30.0


class ReplayView:
    """A viser page showing ``recording`` (a :class:`~hilbot.driver.bench.recording.Recording`).

    Args:
        recording: the recording.
        robot: the kinematic model of its robot.
        chains: the chains to draw frames and targets of (the recording's chain names).
        host: address to bind (loopback by default).
        port: TCP port; 0 picks a free one.
    """

    def __init__(
        self,
        recording: Any,
        robot: Robot,
        chains: list[ChainView],
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
    ) -> None:
        from hilbot.driver.bench.recorder import MODES

        self._modes = MODES
        self.recording = recording
        self.server = open_server(host, port)
        self.port: int = self.server.get_port()
        self.url = f"http://{host}:{self.port}"
        self.scene = RobotScene(self.server, robot, chains)
        header = recording.header
        self._joints = tuple(header.joint_names)
        names = tuple(header.chain_names)
        self._chains = [names.index(c.name) if c.name in names else -1 for c in chains]
        self._chain_names = [c.name for c in chains]
        t = np.asarray(recording["t"], dtype=np.float64)
        self._t = t - t[0] if len(t) else t
        end = float(self._t[-1]) if len(t) else 0.0
        period = 1.0 / float(header.rate_hz)
        gui = self.server.gui
        self.slider = gui.add_slider(
            "time [s]", min=0.0, max=max(end, period), step=period, initial_value=0.0
        )
        self.playing = gui.add_checkbox("play", initial_value=False)
        self.slider.on_update(lambda _event: self.show_time(float(self.slider.value)))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._play, name="hilbot-replay-view", daemon=True)
        self._thread.start()
        self.show_time(0.0)

    def row_at(self, t: float) -> int:
        """The recorded cycle at ``t`` seconds from the start (the last one at or before)."""
        index = int(np.searchsorted(self._t, t, side="right")) - 1
        return min(max(index, 0), max(len(self._t) - 1, 0))

    def show_time(self, t: float) -> None:
        """Show the robot as it was ``t`` seconds into the recording."""
        if not len(self._t):
            return
        self.scene.update(self.frame(self.row_at(t)))

    def frame(self, row: int) -> Frame:
        """What the view shows of recorded cycle ``row``."""
        rec = self.recording
        measured = _finite(self._joints, rec["q_measured"][row])
        command = _finite(self._joints, rec["q_command"][row])
        targets = {}
        for name, c in zip(self._chain_names, self._chains, strict=True):
            if c >= 0 and np.all(np.isfinite(rec["ee_target"][row, c])):
                targets[name] = np.array(rec["ee_target"][row, c], dtype=np.float64)
        mode = self._modes[int(rec["mode"][row])]
        errors = rec["hw_errors"][row]
        faults = ", ".join(
            f"{j}: 0x{int(e):02x}" for j, e in zip(self._joints, errors, strict=True) if e
        )
        return Frame(measured, command or None, targets, mode, faults, float(self._t[row]))

    def _play(self) -> None:
        while not self._stop.wait(1.0 / PLAY_RATE_HZ):
            if not self.playing.value or not len(self._t):
                continue
            t = float(self.slider.value) + 1.0 / PLAY_RATE_HZ
            if t > self._t[-1]:
                t = 0.0
            self.slider.value = t  # the slider's callback draws the frame

    def close(self) -> None:
        """Stop playing and shut the server down."""
        self._stop.set()
        self._thread.join(timeout=2.0)
        self.server.stop()


def _finite(names: tuple[str, ...], values: Any) -> dict[str, float]:
    return {n: float(v) for n, v in zip(names, values, strict=True) if np.isfinite(v)}
