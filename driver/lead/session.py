"""A follower run in this process, for ``hilbot lead`` without ``--mqtt``: its embedded broker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from hilbot.driver.lead.latency import LeadLatency, TimedWrites
from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command
from hilbot.driver.teleop import serve
from hilbot.driver.teleop.client import BrokerUrl
from hilbot.hal.backend import JointState


class _LedRuntime(Runtime):
    """A runtime that tells ``latency`` when it takes joint targets in."""

    def __init__(self, config: RobotConfig, backend: Any, latency: LeadLatency) -> None:
        super().__init__(config, TimedWrites(backend, latency))
        self._latency = latency

    def set_joint_targets(
        self, positions: Mapping[str, float], *, stamp: float | None = None
    ) -> None:
        super().set_joint_targets(positions, stamp=stamp)
        self._latency.arrived(positions)


@contextlib.asynccontextmanager
async def follower(
    config: RobotConfig,
    backend: Any,
    *,
    port: int = 0,
    enable: bool = True,
    check: Callable[[JointState], None] | None = None,
    timeout: float = 30.0,
    latency: LeadLatency | None = None,
) -> AsyncIterator[tuple[Runtime, BrokerUrl]]:
    """Run ``config`` on ``backend`` with MQTT teleop on an embedded broker.

    Yields the runtime and the broker's URL, once connected (and armed with ``enable``).
    The follower's safety layer, watchdog included, applies to every target as it
    does under ``hilbot run``.

    ``latency``, if given, is told which joint targets the runtime takes in and when it
    writes goals (leader read -> follower goal, for the summary).

    ``check`` is given the first reading while the runtime is disarmed, before the
    broker starts (the stale-calibration check): if it raises, nothing is enabled, the
    runtime stops (torque off) and the error passes on.
    """
    settings = config.teleop.model_copy(update={"embedded_port": port})
    made = Runtime(config, backend) if latency is None else _LedRuntime(config, backend, latency)
    async with made as runtime:
        first = runtime.state().joints
        if check is not None and first is not None:
            check(first)
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve(runtime, settings, None, robot_name=config.name, ready=ready), name="teleop"
        )
        try:
            # The first to finish: the broker's ready (the usual case), or its task failing.
            done, _ = await asyncio.wait(
                {task, ready}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if task in done:
                task.result()  # the broker failed: its error
            if ready not in done:
                raise TimeoutError(f"the follower's broker did not start within {timeout:g} s")
            if enable:
                await runtime.command(Command.ENABLE)
            yield runtime, ready.result().url
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
