"""``LiveView``: the running robot in the browser, fed from a cycle listener.

The listener runs in the control loop and only copies the newest cycle's joint
positions, command, targets and mode into one slot (a few small array copies, no
lock held across anything slow, no I/O). A daemon thread wakes at ``rate_hz``, takes
the slot and updates the viser scene; viser's server runs in its own threads. A slow
browser or a busy machine makes the view skip frames, never the loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hilbot.driver.view.geometry import target_point
from hilbot.driver.view.scene import ChainView, Frame, RobotScene
from hilbot.driver.view.server import open_server

#: [Hz] view updates; the loop runs at its own rate whatever this is.
DEFAULT_RATE_HZ = 30.0


class LiveView:
    """A viser page showing ``runtime``'s robot live.

    Args:
        runtime: the running :class:`~hilbot.driver.runtime.loop.Runtime`.
        host: address to bind (loopback by default).
        port: TCP port; 0 picks a free one.
        rate_hz: view update rate.
        scene: objects around the robot to draw (``--backend mujoco --scene``).
        poses: where the free objects are now (``MujocoBackend.scene_poses``), read by the
            drawing thread; without it they stay at their start.
    """

    def __init__(
        self,
        runtime: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
        rate_hz: float = DEFAULT_RATE_HZ,
        scene: Sequence[Any] = (),
        poses: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.server = open_server(host, port)
        self.port: int = self.server.get_port()
        self.url = f"http://{host}:{self.port}"
        chains = [
            ChainView(name, c.source_link, c.target_link)
            for name, c in ((c.name, c) for c in runtime.config.chains)
        ]
        self.scene = RobotScene(self.server, runtime.robot, chains)
        self.scene.add_objects(scene)
        self._poses = poses
        self._names = tuple(runtime.joint_names)
        self._slot: Frame | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._period = 1.0 / rate_hz
        self.frames = 0  # updates drawn
        self._thread = threading.Thread(target=self._run, name="hilbot-view", daemon=True)
        self._thread.start()

    def listener(self, record: Any) -> None:
        """Cycle listener: keep a copy of the newest cycle (called in the control loop)."""
        state = record.state
        if state is None:
            return
        names = self._names
        measured = dict(zip(names, state.position.tolist(), strict=False))
        command = record.command
        commanded = (
            dict(zip(names, command.tolist(), strict=False)) if len(command) == len(names) else None
        )
        targets = {}
        for slot, value in record.targets.items():
            point = target_point(value)
            if point is not None:
                targets[slot] = point
        faults = ", ".join(str(f) for f in state.hardware_errors if f)
        frame = Frame(measured, commanded, targets, record.mode.value, faults, record.woke)
        with self._lock:
            self._slot = frame

    def _run(self) -> None:
        next_time = time.monotonic()
        last: Frame | None = None
        while not self._stop.is_set():
            with self._lock:
                frame = self._slot
            if frame is not None and frame is not last:
                try:
                    self.scene.update(frame)
                    if self._poses is not None:
                        # Read while the loop may step the body: at worst a torn pose
                        # for one frame of the picture, never a change to the body.
                        self.scene.move_objects(self._poses())
                    self.frames += 1
                except Exception:  # a view problem never reaches the loop
                    if self._stop.is_set():
                        return
                last = frame
            next_time += self._period
            self._stop.wait(max(0.0, next_time - time.monotonic()))

    def close(self) -> None:
        """Stop updating and shut the server down."""
        self._stop.set()
        self._thread.join(timeout=2.0)
        self.server.stop()


def start_view(
    runtime: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    scene: Sequence[Any] = (),
    poses: Callable[[], Mapping[str, Any]] | None = None,
) -> LiveView:
    """Open a :class:`LiveView` on ``runtime`` and print its address.

    Raises:
        ViewError: viser is not installed or the port is taken.
    """
    view = LiveView(runtime, host=host, port=port, scene=scene, poses=poses)
    print(f"view: {view.url}", flush=True)
    return view
