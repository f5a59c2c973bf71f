"""Chains: Jacobians against finite differences (planar, floating, mimic), q algebra, batches."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.kinematics import JointType, UnknownLink, load_urdf, spatial

# A robot that exercises every joint type: a planar joint with a tilted normal, a floating
# joint, revolute/prismatic/continuous joints with oblique axes, a mimic follower whose
# leader is on the path, and one whose leader is on another branch.
EXOTIC = """
<robot name="exotic">
  <link name="world"/> <link name="cart"/> <link name="body"/> <link name="arm"/>
  <link name="slider"/> <link name="finger_a"/> <link name="finger_b"/> <link name="tip"/>
  <link name="side"/> <link name="wrist"/>
  <joint name="plane" type="planar">
    <parent link="world"/> <child link="cart"/>
    <origin xyz="0.1 0.2 0.3" rpy="0.1 0.2 0.3"/> <axis xyz="0.3 -0.2 0.9"/>
  </joint>
  <joint name="free" type="floating">
    <parent link="cart"/> <child link="body"/> <origin xyz="0 0 0.2" rpy="0.3 0 0"/>
  </joint>
  <joint name="side_joint" type="revolute">
    <parent link="body"/> <child link="side"/> <origin xyz="0 0.3 0"/> <axis xyz="1 0 0"/>
    <limit lower="-1" upper="1" velocity="2" effort="3"/>
  </joint>
  <joint name="shoulder" type="revolute">
    <parent link="body"/> <child link="arm"/> <origin xyz="0.1 0 0.05" rpy="0 0.4 0"/>
    <axis xyz="0 1 1"/> <limit lower="-2" upper="2" velocity="1.5" effort="3"/>
  </joint>
  <joint name="slide" type="prismatic">
    <parent link="arm"/> <child link="slider"/> <origin xyz="0.2 0 0"/> <axis xyz="1 1 0"/>
    <limit lower="-0.1" upper="0.3" velocity="0.5" effort="30"/>
  </joint>
  <joint name="lead" type="continuous">
    <parent link="slider"/> <child link="finger_a"/> <origin xyz="0.1 0 0" rpy="0 0 0.5"/>
    <axis xyz="0 0 1"/>
  </joint>
  <joint name="follow" type="revolute">
    <parent link="finger_a"/> <child link="finger_b"/> <origin xyz="0.05 0.01 0"/>
    <axis xyz="1 0 0"/> <limit lower="-3" upper="3" velocity="2" effort="3"/>
    <mimic joint="lead" multiplier="-1.5" offset="0.2"/>
  </joint>
  <joint name="side_follow" type="revolute">
    <parent link="finger_b"/> <child link="wrist"/> <origin xyz="0.04 0 0.02"/>
    <axis xyz="0 1 0"/> <limit lower="-3" upper="3" velocity="2" effort="3"/>
    <mimic joint="side_joint" multiplier="0.7" offset="-0.1"/>
  </joint>
  <joint name="tip_joint" type="fixed">
    <parent link="wrist"/> <child link="tip"/> <origin xyz="0.05 0.02 0" rpy="0.2 0 0"/>
  </joint>
</robot>
"""


@pytest.fixture
def exotic():
    return load_urdf(EXOTIC)


def test_columns_follow_the_path_and_add_off_path_leaders(exotic):
    chain = exotic.path_between("world", "tip")
    assert [j.name for j in chain.joints] == [
        "plane",
        "free",
        "shoulder",
        "slide",
        "lead",
        "side_joint",
    ]
    assert chain.dof == 3 + 6 + 4
    assert chain.jacobian_columns[:4] == (("plane", 0), ("plane", 1), ("plane", 2), ("free", 0))
    assert chain.jacobian_columns[-1] == ("side_joint", 0)
    assert chain.links == (
        "world",
        "cart",
        "body",
        "arm",
        "slider",
        "finger_a",
        "finger_b",
        "wrist",
        "tip",
    )
    assert exotic.joints["follow"].dof == 0
    assert exotic.joints["free"].dof == 6
    assert exotic.joints["plane"].dof == 3
    np.testing.assert_array_equal(chain.lower[:9], -np.inf)
    np.testing.assert_array_equal(chain.upper[:9], np.inf)
    assert chain.lower[9] == -2.0 and chain.upper[10] == 0.3
    assert chain.lower[11] == -np.inf  # continuous
    assert chain.velocity_limit[9] == 1.5 and chain.velocity_limit[0] == np.inf


def _fd_jacobian(chain, q, pose, eps=1e-6):
    cols = []
    for i in range(chain.dof):
        step = np.zeros(chain.dof)
        step[i] = eps
        plus, minus = pose(chain.integrate(q, step)), pose(chain.integrate(q, -step))
        lin = (plus[:3, 3] - minus[:3, 3]) / (2 * eps)
        ang = spatial.so3_log(plus[:3, :3] @ minus[:3, :3].T) / (2 * eps)
        cols.append(np.concatenate([lin, ang]))
    return np.array(cols).T


@pytest.mark.parametrize("source", ["world", "cart", "body"])
def test_jacobian_is_the_derivative_of_fk_along_integrate(exotic, random_q, source):
    chain = exotic.path_between(source, "tip")
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = random_q(chain, rng)
        np.testing.assert_allclose(chain.jacobian(q), _fd_jacobian(chain, q, chain.fk), atol=1e-7)


def test_jacobian_at_intermediate_links_is_their_derivative(exotic, random_q):
    chain = exotic.path_between("world", "tip")
    rng = np.random.default_rng(4)
    q = random_q(chain, rng)
    for link in chain.links:
        got = chain.jacobian_at(link, q)
        want = _fd_jacobian(chain, q, lambda x, link=link: chain.link_poses(x)[link])
        np.testing.assert_allclose(got, want, atol=1e-7, err_msg=link)
    assert not chain.jacobian_at("world", q).any()
    with pytest.raises(UnknownLink) as info:
        chain.jacobian_at("side", q)
    assert info.value.link == "side" and info.value.role == "link"


def test_chain_agrees_with_robot_fk_and_mimic_follows(exotic, random_q):
    chain = exotic.path_between("world", "tip")
    rng = np.random.default_rng(5)
    for _ in range(10):
        q = random_q(chain, rng)
        positions = chain.q_to_dict(q)
        positions["follow"] = 123.0  # a follower's own value is ignored
        everything = exotic.fk(positions)
        poses = chain.link_poses(q)
        for link in chain.links:
            np.testing.assert_allclose(poses[link], everything[link], atol=1e-12)
        # The follower's motion is multiplier * leader + offset.
        lead = positions["lead"]
        rel = spatial.inverse_transform(everything["finger_a"]) @ everything["finger_b"]
        want = exotic.joints["follow"].motion(-1.5 * lead + 0.2)
        np.testing.assert_allclose(rel, want, atol=1e-12)


@pytest.mark.parametrize(
    "source", ["world", "body"], ids=["floating, planar, mimic", "mimic, off-path leader"]
)
def test_batch_equals_one_by_one(exotic, random_q, source):
    chain = exotic.path_between(source, "tip")
    rng = np.random.default_rng(6)
    qs = random_q(chain, rng, batch=25)
    t, j = chain.fk_jacobian_batch(qs)
    assert t.shape == (25, 4, 4) and j.shape == (25, 6, chain.dof)
    np.testing.assert_allclose(chain.fk_batch(qs), t, atol=0)
    for i in range(25):
        ti, ji = chain.fk_jacobian(qs[i])
        np.testing.assert_allclose(t[i], ti, atol=1e-13)
        np.testing.assert_allclose(j[i], ji, atol=1e-13)
        np.testing.assert_allclose(chain.fk(qs[i]), ti, atol=1e-13)
        np.testing.assert_allclose(chain.jacobian(qs[i]), ji, atol=1e-13)
        np.testing.assert_allclose(chain.fk(list(qs[i])), ti, atol=1e-13)
    with pytest.raises(ValueError, match=rf"shape \(B, {chain.dof}\)"):
        chain.fk_batch(qs[0])
    with pytest.raises(ValueError, match=rf"\({chain.dof},\)"):
        chain.fk_jacobian(qs[0][:-1])


def test_integrate_and_difference_are_inverse(exotic, random_q):
    chain = exotic.path_between("world", "tip")
    rng = np.random.default_rng(8)
    for _ in range(20):
        q0, q1 = random_q(chain, rng), random_q(chain, rng)
        dq = chain.difference(q1, q0)
        np.testing.assert_allclose(chain.fk(chain.integrate(q0, dq)), chain.fk(q1), atol=1e-10)
        small = rng.normal(size=chain.dof) * 0.1
        np.testing.assert_allclose(
            chain.difference(chain.integrate(q0, small), q0), small, atol=1e-10
        )
    np.testing.assert_allclose(chain.difference(q0, q0), 0.0, atol=1e-12)


def test_floating_joint_integrates_in_its_own_frame(exotic):
    chain = exotic.path_between("cart", "body")
    q = np.array([0.1, 0.2, 0.3, 0.0, 0.0, np.pi / 2])
    step = np.array([1.0, 0, 0, 0, 0, 0])
    moved = chain.integrate(q, step)
    # Rotated 90 degrees about z, the joint's own x is the parent's y.
    np.testing.assert_allclose(moved[:3], [0.1, 1.2, 0.3], atol=1e-12)


def test_q_from_accepts_mappings_and_poses(exotic, random_q):
    chain = exotic.path_between("world", "tip")
    rng = np.random.default_rng(9)
    q = random_q(chain, rng)
    d = chain.q_to_dict(q)
    assert isinstance(d["shoulder"], float) and d["free"].shape == (6,)
    np.testing.assert_allclose(chain.q_from(d), q, atol=0)
    # Poses for the floating joint: 4x4, and position + quaternion (w, x, y, z).
    free = exotic.joints["free"]
    pose = free.motion(d["free"])
    local = spatial.inverse_transform(free.origin) @ pose
    quat = spatial.matrix_to_quat(local[:3, :3])
    for form in (local, np.concatenate([local[:3, 3], quat])):
        np.testing.assert_allclose(chain.q_from({**d, "free": form}), q, atol=1e-12)
    # A pose for the planar joint is projected onto its plane.
    plane = exotic.joints["plane"]
    local = spatial.inverse_transform(plane.origin) @ plane.motion(d["plane"])
    np.testing.assert_allclose(chain.q_from({**d, "plane": local}), q, atol=1e-12)
    # Extra names are ignored, missing ones are named, a default fills them.
    with pytest.raises(KeyError, match="shoulder"):
        chain.q_from({k: v for k, v in d.items() if k != "shoulder"} | {"side_follow": 1.0})
    filled = chain.q_from({"slide": 0.2}, default=np.zeros(chain.dof))
    assert filled[10] == 0.2 and np.count_nonzero(filled) == 1
    with pytest.raises(ValueError, match=r"\(13,\)"):
        chain.q_from(np.zeros(12))
    with pytest.raises(ValueError, match="'free'"):
        chain.q_from({**d, "free": np.zeros(5)})


def test_path_between_is_memoised(exotic):
    assert exotic.path_between("world", "tip") is exotic.path_between("world", "tip")
    assert exotic.path_between("body", "tip") is not exotic.path_between("world", "tip")


def test_degenerate_chains(exotic):
    same = exotic.path_between("arm", "arm")
    assert same.dof == 0 and same.joints == () and same.links == ("arm",)
    np.testing.assert_array_equal(same.fk(np.zeros(0)), np.eye(4))
    assert same.jacobian(np.zeros(0)).shape == (6, 0)
    fixed = exotic.path_between("wrist", "tip")
    assert fixed.dof == 0
    np.testing.assert_allclose(fixed.fk([]), exotic.joints["tip_joint"].origin)
    t, j = fixed.fk_jacobian_batch(np.zeros((3, 0)))
    assert t.shape == (3, 4, 4) and j.shape == (3, 6, 0)
    assert set(fixed.link_poses([])) == {"wrist", "tip"}


def test_robot_fk_takes_a_leader_in_any_scalar_form(exotic):
    # A mimic follower reads its leader's value as the leader itself does: a float, a numpy
    # scalar, or a (1,) array.
    want = exotic.fk({"lead": 0.3, "side_joint": -0.2})
    for lead in (np.float64(0.3), np.array(0.3), np.array([0.3]), [0.3]):
        got = exotic.fk({"lead": lead, "side_joint": np.array([-0.2])})
        for link in ("finger_b", "wrist", "tip"):
            np.testing.assert_array_equal(got[link], want[link])


def test_robot_fk_defaults_and_limits(exotic):
    fk = exotic.fk({})
    assert set(fk) == set(exotic.links)
    np.testing.assert_allclose(fk["world"], np.eye(4))
    assert exotic.limits("slide") == (-0.1, 0.3)
    assert exotic.limits("lead") == (-np.inf, np.inf)
    assert exotic.joints["plane"].type is JointType.PLANAR
    assert exotic.movable_joints == ("plane", "free", "side_joint", "shoulder", "slide", "lead")


def test_non_finite_configuration_is_named(exotic):
    chain = exotic.path_between("body", "tip")
    q = np.zeros(chain.dof)
    q[0] = np.inf
    for call in (chain.fk, chain.fk_jacobian, chain.link_poses):
        with pytest.raises(ValueError, match="not finite"):
            call(q)
    with pytest.raises(ValueError, match="not finite"):
        chain.jacobian_at("slider", q)
    q[0] = np.nan  # NaN propagates, as in numpy
    assert np.isnan(chain.fk(q)).any()
