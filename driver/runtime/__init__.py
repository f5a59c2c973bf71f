"""The runtime: the control loop and what it runs on.

- ``loop``: :class:`Runtime`, the asyncio control loop (read, motion, safety, write);
- ``motion`` and ``planners``: the motion layer, and the planners it is measured against;
- ``safety``: the last stage before the bus (limits, max delta, velocity, acceleration);
- ``targets``: the door for joint and pose targets, and the pose stream;
- ``readings``, ``faults``, ``state``, ``stats``, ``ticker``: what the loop reads, how it
  fails safe, what it reports and how it keeps time;
- ``config``, ``chains``, ``validation``, ``errors``: the robot file, its solvers, its checks;
- ``backends``, ``trajectory``: the simulated, virtual and hardware backends a config names,
  and the timed trajectories ``hilbot run`` plays.

The applications (``teleop``, ``bench``, ``calibration``, ``lead``, ``view``, ``dataset``,
``lerobot_bridge``) build on it; the command line (``cli``, ``commands``) on both.
``Runtime`` is imported lazily, so ``import hilbot.driver.runtime.config`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hilbot.driver.runtime.loop import Runtime

__all__ = ["Runtime"]


def __getattr__(name: str) -> Any:
    """``Runtime``, imported on first use."""
    if name == "Runtime":
        from hilbot.driver.runtime.loop import Runtime

        return Runtime
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
