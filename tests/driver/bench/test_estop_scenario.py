"""The full-speed e-stop scenario: its limits follow from the config, and the stop meets them."""

import numpy as np
import pytest

from hilbot.driver.bench.backends import BackendKind, ClockKind
from hilbot.driver.bench.report import write_outputs
from hilbot.driver.bench.runner import RunOptions, run_bench
from hilbot.driver.bench.scenario import load_scenario, resolve_scenario
from hilbot.driver.runtime.backends import sim_backend
from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.ticker import ManualClock

NAME = "openmanipulator_estop"


@pytest.fixture(scope="module")
def config():
    return load_config("openmanipulator_x")


async def test_the_thresholds_are_the_bounds_of_the_configured_limits(config):
    clock = ManualClock(0.0)
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        limits = rt.motion.limits
        period = rt.period
    full = limits.velocity.copy()  # every joint at its velocity limit, not accelerating
    time_bound = float(limits.stopping_time(full)[0]) + 2 * period
    distance_bound = float(limits.stopping_distance(full)[0] + limits.velocity[0] * period)
    th = load_scenario(resolve_scenario(NAME)).thresholds
    assert th.stop_time_max == pytest.approx(time_bound, abs=1e-3)
    assert th.stop_distance_max == pytest.approx(distance_bound, abs=1e-3)


async def test_an_estop_at_full_speed_stops_within_the_configured_limits(config, tmp_path):
    path = resolve_scenario(NAME)
    scenario = load_scenario(path)
    options = RunOptions(base_dir=path.parent, config_path="openmanipulator_x", clock="fake")
    recording = await run_bench(config, scenario, BackendKind.SIM, ClockKind.FAKE, options)
    outcome = write_outputs(recording, scenario.thresholds, tmp_path, plots=False)
    assert all(r.passed for r in outcome.thresholds), outcome.thresholds
    (stop,) = outcome.report.stops
    assert stop.mode == "estopped" and stop.joint == "joint1"
    assert stop.speed > 0.9 * 3.65  # it was at full speed
    # decelerating from the command: never a step back, never beyond the limits
    command = recording["q_command"][:, 0]
    t = recording["t"]
    after = (t >= stop.time - 0.01) & (t <= stop.time + stop.duration + 0.05)
    steps = np.diff(command[after])
    assert np.all(steps * np.sign(steps[0]) >= -1e-12)
