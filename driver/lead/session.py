"""A follower run in this process, for ``hilbot lead`` without ``--mqtt``: its embedded broker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from hilbot.driver.config import RobotConfig
from hilbot.driver.runtime import Runtime
from hilbot.driver.state import Command
from hilbot.driver.teleop import serve
from hilbot.driver.teleop.client import BrokerUrl
from hilbot.hal.backend import JointState


@contextlib.asynccontextmanager
async def follower(
    config: RobotConfig,
    backend: Any,
    *,
    port: int = 0,
    enable: bool = True,
    check: Callable[[JointState], None] | None = None,
    timeout: float = 30.0,
) -> AsyncIterator[tuple[Runtime, BrokerUrl]]:
    """Run ``config`` on ``backend`` with MQTT teleop on an embedded broker.

    Yields the runtime and the broker's URL, once connected (and armed with ``enable``).
    The follower's safety layer, watchdog included, applies to every target as it
    does under ``hilbot run``.

    ``check`` is given the first reading while the runtime is disarmed, before the
    broker starts (the stale-calibration check): if it raises, nothing is enabled, the
    runtime stops (torque off) and the error passes on.
    """
    settings = config.teleop.model_copy(update={"embedded_port": port})
    async with Runtime(config, backend) as runtime:
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
