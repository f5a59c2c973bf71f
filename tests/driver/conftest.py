"""Fixtures of the driver tests: shipped configs, a simulated backend on a manual clock,
and a runtime on the virtual bus through the real Dynamixel backend."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hilbot.configs import config_path
from hilbot.driver.backends import VIRTUAL_MARGIN_MS, dynamixel_backend
from hilbot.driver.config import RobotConfig, parse_config
from hilbot.driver.runtime import Runtime
from hilbot.driver.ticker import ManualClock
from hilbot.sim.sim_backend import SimBackend
from hilbot.sim.testing import running_virtual_bus


def config_data(name: str) -> dict[str, Any]:
    """The parsed YAML of a shipped config, with its URDF path made absolute."""
    path = config_path(name)
    data = yaml.safe_load(path.read_text())
    data["urdf"] = str(path.parent / data["urdf"])
    return data


def _make_config(name: str = "openmanipulator_x", **changes: Any) -> RobotConfig:
    """A shipped config with top-level fields replaced (``safety`` is merged)."""
    data = config_data(name)
    safety = changes.pop("safety", None)
    if safety is not None:
        data["safety"] = {**data.get("safety", {}), **safety}
    data.update(changes)
    return parse_config(data)


@pytest.fixture
def make_config() -> Callable[..., RobotConfig]:
    """``make_config(name, **changes)``: a shipped config with fields replaced."""
    return _make_config


@pytest.fixture
def config_data_of() -> Callable[[str], dict[str, Any]]:
    """``config_data_of(name)``: the YAML mapping of a shipped config (URDF path absolute)."""
    return config_data


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(100.0)


@pytest.fixture
def sim_factory(clock: ManualClock) -> Callable[..., SimBackend]:
    def make(config: RobotConfig, **options: Any) -> SimBackend:
        options.setdefault("initial_positions", dict(config.home))
        options.setdefault("torque_off_on_close", False)  # so tests see what the runtime did
        return SimBackend(config.servo_specs(), clock=clock, **options)

    return make


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    def write(data: dict[str, Any], name: str = "robot.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture(params=[False, True], ids=["plain", "pipelined"])
def running(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``running(config)``: the virtual bus and a runtime on it, pipelined or not."""

    @contextlib.asynccontextmanager
    async def run(config: RobotConfig) -> AsyncIterator[tuple[Any, Runtime]]:
        async with running_virtual_bus(
            config.servo_specs(), baudrate=1_000_000, initial_positions=dict(config.home)
        ) as vbus:
            backend = dynamixel_backend(
                config, {"main": vbus.port}, margin_ms=VIRTUAL_MARGIN_MS, pipeline=request.param
            )
            async with Runtime(config, backend) as rt:
                yield vbus, rt
            assert vbus.errors == []  # the bus server itself never failed

    return run
