"""Fixtures for the IK tests: the shipped robots and the chains every solver must handle."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hilbot.kinematics import Chain, JointType, Robot, load_urdf

ROBOTS = Path(__file__).resolve().parents[3] / "configs" / "robots"
ASSETS = Path(__file__).resolve().parents[2] / "assets"

# (robot, source link, target link): every shipped robot, with its end effectors.
ARMS = [
    ("ur5", "base_link", "tool0"),
    ("panda", "panda_link0", "panda_hand_tcp"),
    ("widowx_250s", "base_link", "ee_gripper_link"),
    ("koch_v1_1", "base_link", "tool"),
    ("openmanipulator_x", "world", "end_effector_link"),
    ("bimanual", "world", "left_tool"),
    ("bimanual", "world", "right_tool"),
    ("hexapod", "base_link", "leg1_foot"),
    ("hexapod", "world", "leg4_foot"),
]
ARM_IDS = [f"{r}:{t}" for r, _, t in ARMS]


@functools.cache
def robot(name: str) -> Robot:
    """A shipped robot, loaded once per session."""
    return load_urdf(ROBOTS / f"{name}.urdf")


@pytest.fixture
def planar_2r() -> Robot:
    """A planar 2R arm whose joint limits keep it from reaching behind itself."""
    return load_urdf(ASSETS / "planar_2r.urdf")


def random_q(chain: Chain, rng: np.random.Generator, margin: float = 0.0) -> np.ndarray:
    """A random configuration within the limits (shrunk by ``margin``; ±pi if unbounded)."""
    lo = np.where(np.isfinite(chain.lower), chain.lower + margin, -np.pi)
    hi = np.where(np.isfinite(chain.upper), chain.upper - margin, np.pi)
    q = rng.uniform(np.minimum(lo, hi), np.maximum(lo, hi))
    for j in chain.joints:
        if j.type is JointType.FLOATING:
            c = chain.jacobian_columns.index((j.name, 0))
            q[c : c + 3] = rng.uniform(-0.3, 0.3, 3)
            q[c + 3 : c + 6] = rng.uniform(-0.5, 0.5, 3)
    return q


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


@pytest.fixture(params=ARMS, ids=ARM_IDS)
def arm(request: pytest.FixtureRequest) -> tuple[Robot, str, str, Chain]:
    name, source, target = request.param
    r = robot(name)
    return r, source, target, r.path_between(source, target)


@pytest.fixture
def load() -> Callable[[str], Robot]:
    return robot


@pytest.fixture
def sample() -> Callable[..., np.ndarray]:
    return random_q


Poses = tuple[Robot, str, str, np.ndarray, np.ndarray]


def near_poses(name: str, count: int) -> Poses:
    """``count`` reachable poses of ``name``'s first arm in ``ARMS``, each with a near seed.

    Returns ``(robot, source, tip, seeds, targets)``: configurations drawn in the limits
    (within ±pi), their (count, 4, 4) poses, and seeds up to 0.3 rad off per joint.
    """
    source, tip = next((s, t) for r, s, t in ARMS if r == name)
    arm_robot = robot(name)
    chain = arm_robot.path_between(source, tip)
    rng = np.random.default_rng(0)
    lo, hi = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    q_true = rng.uniform(lo, hi, (count, chain.dof))
    seeds = np.clip(q_true + rng.uniform(-0.3, 0.3, q_true.shape), chain.lower, chain.upper)
    return arm_robot, source, tip, seeds, chain.fk_batch(q_true)


@pytest.fixture
def poses() -> Callable[[str, int], Poses]:
    """``poses(name, count)``: see ``near_poses``."""
    return near_poses
