"""What ``hilbot run``'s shutdown did, in one line: "torque off on 5 servos", or "holding".

:class:`TorqueWatch` passes a backend through unchanged and remembers the outcome of
its last whole-robot torque call, so the command can say what the runtime's shutdown
did without the runtime having to report it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from hilbot._compat import Self
from hilbot.driver.runtime.config import RobotConfig


class TorqueWatch:
    """A backend that records the outcome of ``set_torque`` (everything else passes through).

    Args:
        backend: the backend the runtime drives.

    Attributes:
        torque: torque of every servo after the last whole-robot ``set_torque`` that
            succeeded; ``None`` before any, or after one that failed.
        error: the error of the last whole-robot ``set_torque`` that failed, if any.
        enabled: whether this run turned torque on at all (its servos then held goals).
    """

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.read = backend.read  # the cycle's calls go straight to the backend
        self.write = backend.write
        self.torque: bool | None = None
        self.error: BaseException | None = None
        self.enabled = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    async def __aenter__(self) -> Self:
        await self._backend.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._backend.__aexit__(exc_type, exc, tb)

    async def enable_holding(self, positions: Mapping[str, float]) -> None:
        """Enable torque holding ``positions`` (see ``hilbot.hal.backend.enable_holding``)."""
        from hilbot.hal.backend import enable_holding

        try:
            await enable_holding(self._backend, positions)
        except BaseException as err:
            self.torque, self.error = None, err
            raise
        self.torque, self.error = True, None
        self.enabled = True

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        """Enable or disable torque, remembering how a whole-robot call ended."""
        if joints is not None:
            await self._backend.set_torque(enabled, joints)
            self.enabled = self.enabled or enabled
            return
        try:
            await self._backend.set_torque(enabled)
        except BaseException as err:
            self.torque, self.error = None, err
            raise
        self.torque, self.error = enabled, None
        self.enabled = self.enabled or enabled


def torque_left_on(config: RobotConfig, watch: TorqueWatch) -> bool:
    """Whether the shutdown was to turn torque off and did not (``hilbot run`` exits 1)."""
    return config.safety.torque_off_on_shutdown and watch.torque is not False


def shutdown_text(config: RobotConfig, watch: TorqueWatch) -> str:
    """One line on what the shutdown left the robot in."""
    servos = len(config.servos)
    if not config.safety.torque_off_on_shutdown:
        return (
            f"shutdown: holding the last goal, torque left on on {servos} servos "
            "(safety.torque_off_on_shutdown: false)"
        )
    if watch.torque is False:
        return f"shutdown: torque off on {servos} servos"
    hint = (
        f"servos with a bus watchdog stop by themselves within {config.safety.bus_watchdog:g} s"
        if config.safety.bus_watchdog is not None
        else "cut the servos' power"
    )
    reason = f": {watch.error}" if watch.error is not None else ""
    left = (
        "they may still have torque on, holding their last goal"
        if watch.enabled
        else "their torque is as this run found it (it never turned torque on)"
    )
    return f"shutdown: could not turn torque off on {servos} servos{reason}; {left}; {hint}"
