"""FaultHandler's safe state is changed through its methods; its flags are read-only."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest

from hilbot.driver.runtime.config import EstopAction, RobotConfig
from hilbot.driver.runtime.faults import FaultHandler
from hilbot.driver.runtime.safety import JointLimits, Mode, ModeMachine
from hilbot.driver.runtime.stats import StatsRecorder
from hilbot.driver.runtime.ticker import ManualClock
from hilbot.sim.sim_backend import SimBackend


class Kit:
    def __init__(self, config: RobotConfig, backend: SimBackend, action: EstopAction) -> None:
        n = len(config.joint_names)
        self.backend = backend
        self.modes = ModeMachine()
        self.dropped = 0
        self.stops: list[str] = []
        self.limits = JointLimits(config.joint_names, -np.ones(n), np.ones(n), np.ones(n))
        self.handler = FaultHandler(
            backend=backend,
            modes=self.modes,
            stats=StatsRecorder(config.rate_hz),
            limits=self.limits,
            safety=config.safety.model_copy(update={"estop_action": action}),
            clock=ManualClock(0.0),
            log=logging.getLogger("test.fault_handler"),
            begin_stop=self.stops.append,
            drop_targets=self._drop,
        )

    def _drop(self) -> None:
        self.dropped += 1

    def torque(self) -> list[bool]:
        return [bool(t) for t in self.backend.model.torque_enabled]


@pytest.fixture
async def kit(
    make_config: Callable[..., RobotConfig], sim_factory: Callable[..., SimBackend]
) -> AsyncIterator[Callable[[EstopAction], Any]]:
    config = make_config("openmanipulator_x")
    backends: list[SimBackend] = []

    async def make(action: EstopAction) -> Kit:
        backend = sim_factory(config)
        await backend.__aenter__()
        backends.append(backend)
        await backend.set_torque(True)
        return Kit(config, backend, action)

    yield make
    for backend in backends:
        await backend.__aexit__(None, None, None)


@pytest.mark.parametrize("action", [EstopAction.HOLD, EstopAction.STOP])
async def test_estop_stop_begins_a_controlled_stop_and_holds_where_it_ends(
    kit: Any, action: EstopAction
) -> None:
    k = await kit(action)
    k.modes.estop()
    await k.handler.estop()
    assert k.stops == ["estop"]  # from the commanded motion: no goal from a reading
    assert k.handler.stopping and k.handler.hold is None
    assert not k.handler.torque_off_pending
    k.handler.stop_done(np.full(len(k.limits.names), 0.25))
    assert not k.handler.stopping
    assert k.handler.hold is not None and k.handler.hold.tolist() == [0.25] * len(k.limits.names)
    assert not k.handler.torque_off_pending
    assert all(k.torque())  # holding: torque stays on
    await k.handler.estop(in_effect=True)  # a second e-stop changes nothing
    assert k.stops == ["estop"]


async def test_estop_stop_then_torque_off_cuts_torque_at_rest(kit: Any) -> None:
    k = await kit(EstopAction.STOP_THEN_TORQUE_OFF)
    k.modes.estop()
    await k.handler.estop()
    assert k.stops == ["estop"] and not k.handler.torque_off_pending
    k.handler.stop_done(np.zeros(len(k.limits.names)))
    assert k.handler.torque_off_pending  # category 1: torque off once at rest
    await k.handler.torque_off()
    assert not any(k.torque())


async def test_estop_torque_off_cuts_torque_now(kit: Any) -> None:
    k = await kit(EstopAction.TORQUE_OFF)
    k.modes.estop()
    await k.handler.estop()
    assert k.handler.hold is None
    assert not k.handler.torque_off_pending  # the backend took it
    assert not any(k.torque())


async def test_torque_is_off_ends_a_pending_torque_off(kit: Any) -> None:
    k = await kit(EstopAction.TORQUE_OFF)
    k.handler.enter_safe_state()  # an internal fault: torque is to go off next cycle
    assert k.modes.mode is Mode.FAULTED and k.handler.torque_off_pending
    await k.backend.set_torque(False)  # a reset or disable did it
    k.handler.torque_is_off()
    assert not k.handler.torque_off_pending
    k.handler.torque_must_go_off()  # an enable that failed part way
    assert k.handler.torque_off_pending


async def test_the_fault_stop_is_done_at_rest_and_reset_clears_it(kit: Any) -> None:
    k = await kit(EstopAction.HOLD)
    k.handler.enter_safe_state()
    assert k.modes.mode is Mode.FAULTED and k.stops == ["fault"]
    assert k.handler.stopping and k.handler.hold_pending and k.handler.hold is None
    k.handler.stop_done(np.zeros(len(k.limits.names)))
    assert not k.handler.hold_pending and not k.handler.stopping
    assert k.handler.hold is not None
    k.handler.reset()
    assert k.handler.hold is None and not k.handler.hold_pending and not k.handler.stopping


@pytest.mark.parametrize("field", ["hold", "hold_pending", "torque_off_pending", "stopping"])
async def test_the_safe_state_flags_cannot_be_set_from_outside(kit: Any, field: str) -> None:
    k = await kit(EstopAction.HOLD)
    with pytest.raises(AttributeError):
        setattr(k.handler, field, None)


async def test_a_fault_while_estopped_keeps_a_pending_torque_off(kit: Any) -> None:
    """A refused e-stop torque-off is retried every cycle: a bus fault must not end that."""
    k = await kit(EstopAction.TORQUE_OFF)
    k.modes.estop()
    k.handler.torque_must_go_off()  # the e-stop's torque-off was refused: retried each cycle
    k.handler.fault()  # then the bus faults; the latched e-stop keeps its mode
    assert k.modes.mode is Mode.ESTOPPED
    assert k.handler.torque_off_pending
