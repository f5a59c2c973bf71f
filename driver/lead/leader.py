"""The leader's loop: read the arm at its rate, publish the mapped joints as follower targets."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from hilbot.driver.lead.mapping import LeadMap
from hilbot.driver.teleop.publisher import TeleopPublisher
from hilbot.hal.backend import Backend
from hilbot.hal.errors import CommError

_log = logging.getLogger(__name__)
#: How long the leader's reads may fail before leading stops [s].
MAX_SILENCE = 1.0

#: Called after each publish with the leader read's timestamp [s] and the targets sent.
OnPublish = Callable[[float, dict[str, float]], None]


async def prepare_leader(backend: Backend, mapping: LeadMap) -> None:
    """Torque off on every leader joint, except a light hold on the trigger if configured.

    The hold joint gets its goal first, then torque, so it does not jump.
    """
    hold = mapping.hold
    others = [j for j in backend.joint_names if hold is None or j != hold.joint]
    await backend.set_torque(False, others)
    if hold is not None:
        await backend.write({hold.joint: hold.position})
        await backend.set_torque(True, [hold.joint])


async def lead(
    backend: Backend,
    mapping: LeadMap,
    publisher: TeleopPublisher,
    rate_hz: float,
    *,
    on_publish: OnPublish | None = None,
    ttl: float | None = None,
    max_silence: float = MAX_SILENCE,
) -> None:
    """Read the leader and publish follower joint targets at ``rate_hz`` until cancelled.

    A cycle that comes late is not made up for: the next one is a period after it (a
    leader has nothing to catch up; only the newest target counts on the follower). A
    failed read publishes nothing that cycle (the follower's watchdog covers the gap);
    reads failing for ``max_silence`` seconds end the loop with the last error.
    """
    if not rate_hz > 0:
        raise ValueError(f"rate_hz must be positive, got {rate_hz!r}")
    loop = asyncio.get_running_loop()
    period = 1.0 / rate_hz
    due = loop.time()
    last_good = due
    while True:
        try:
            state = await backend.read()
        except CommError as exc:
            if loop.time() - last_good > max_silence:
                raise
            _log.warning("leader read failed, nothing published this cycle: %s", exc)
            due = max(due + period, loop.time())
            await asyncio.sleep(due - loop.time())
            continue
        last_good = loop.time()
        targets = mapping(state.positions())
        await publisher.joint_target(targets, ttl=ttl)
        if on_publish is not None:
            on_publish(state.timestamp, targets)
        due += period
        now = loop.time()
        if due < now:
            due = now
        await asyncio.sleep(due - now)
