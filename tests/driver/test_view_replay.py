"""hilbot replay --view: the recording at the slider's time."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("viser", reason="the view extra is not installed")

from hilbot.driver.bench.backends import BackendKind, ClockKind
from hilbot.driver.bench.runner import RunOptions, run_bench
from hilbot.driver.bench.scenario import load_scenario, resolve_scenario
from hilbot.driver.runtime.config import load_config
from hilbot.driver.runtime.validation import load_robot
from hilbot.driver.view.geometry import segment_pose
from hilbot.driver.view.replay_view import ReplayView
from hilbot.driver.view.scene import ChainView


async def test_the_slider_shows_the_recorded_pose():
    config = load_config("openmanipulator_x")
    scenario = load_scenario(resolve_scenario("openmanipulator_step")).scaled(0.3)
    options = RunOptions(config_path="openmanipulator_x", clock="fake", progress=False)
    recording = await run_bench(config, scenario, BackendKind.SIM, ClockKind.FAKE, options)
    robot = load_robot(config.urdf)
    chains = [ChainView(c.name, c.source_link, c.target_link) for c in config.chains]
    view = ReplayView(recording, robot, chains, port=0)
    try:
        names = recording.header.joint_names
        t = recording["t"] - recording["t"][0]
        k = next(i for i, s in enumerate(view.scene._segments) if s.link == "link5")
        centers = []
        q = recording["q_measured"]
        farthest = int(np.argmax(np.abs(q - q[0]).sum(axis=1)))  # mid-step
        # Mid-step first: the slider starts at 0, and setting the value it has draws nothing.
        for wanted in (float(t[farthest]), 0.0):
            view.slider.value = wanted  # as a user dragging it: only its callback draws
            when = float(view.slider.value)  # where the slider really is (its step)
            row = view.row_at(when)
            assert t[row] <= when < (t[row + 1] if row + 1 < len(t) else np.inf)
            row_q = dict(zip(names, q[row].tolist(), strict=True))
            pose = robot.fk({j: v for j, v in row_q.items() if j != "gripper"})
            _, center, _ = segment_pose(pose["link5"], view.scene._segments[k])
            assert np.allclose(view.scene._measured[k].position, center, atol=1e-6)
            centers.append(center)
        assert np.linalg.norm(centers[0] - centers[1]) > 0.005  # the arm moved in between
        assert view.row_at(-1.0) == 0 and view.row_at(1e9) == len(t) - 1
    finally:
        view.close()
