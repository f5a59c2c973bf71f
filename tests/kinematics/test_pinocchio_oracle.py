"""FK and Jacobians of every shipped robot agree with pinocchio on 1,000 random configurations.

pinocchio builds its model from the same URDF text. Its configuration encodings differ from
ours: a continuous joint is (cos, sin), a free-flyer is (x, y, z, qx, qy, qz, qw), and mimic
followers are independent joints (we set them from their leaders and fold their Jacobian
columns into the leader's column, which is what a mimic joint means).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from hilbot.kinematics import JointType, Robot, load_urdf, spatial

ROBOTS_DIR = Path(__file__).resolve().parents[2] / "configs" / "robots"
SHIPPED = sorted(p.stem for p in ROBOTS_DIR.glob("*.urdf"))
N = 1000
TOL = 1e-9


def urdf_text(name: str) -> str:
    return (ROBOTS_DIR / f"{name}.urdf").read_text()


def _random_joint_values(robot: Robot, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per movable (non-mimic) joint: (N, dof) random coordinates."""
    values = {}
    for name in robot.movable_joints:
        j = robot.joints[name]
        if j.type is JointType.FLOATING:
            axis = rng.normal(size=(N, 3))
            axis /= np.linalg.norm(axis, axis=1, keepdims=True)
            rot = axis * rng.uniform(0.0, np.pi, size=(N, 1))
            values[name] = np.hstack([rng.uniform(-1, 1, size=(N, 3)), rot])
        else:
            lo, hi = j.bounds()
            lo, hi = (-np.pi, np.pi) if not np.isfinite(lo) else (lo, hi)
            values[name] = rng.uniform(lo, hi, size=(N, 1))
    return values


def _pin_q(model: pin.Model, robot: Robot, values: dict[str, np.ndarray], i: int) -> np.ndarray:
    q = np.zeros(model.nq)
    for jid in range(1, model.njoints):
        name, joint = model.names[jid], model.joints[jid]
        mimic = robot.leader(name)
        v = (
            values[mimic.joint][i] * mimic.multiplier + mimic.offset
            if mimic is not None
            else values[name][i]
        )
        kind = robot.joints[name].type
        if kind is JointType.CONTINUOUS:
            q[joint.idx_q : joint.idx_q + 2] = np.cos(v[0]), np.sin(v[0])
        elif kind is JointType.FLOATING:
            w, x, y, z = spatial.rotvec_to_quat(v[3:])
            q[joint.idx_q : joint.idx_q + 7] = [*v[:3], x, y, z, w]
        else:
            q[joint.idx_q] = v[0]
    return q


@pytest.mark.parametrize("name", SHIPPED)
def test_fk_and_jacobians_match_pinocchio(name: str) -> None:
    xml = urdf_text(name)
    robot = load_urdf(xml)
    model = pin.buildModelFromXML(xml)
    data = model.createData()
    rng = np.random.default_rng(20261129)
    values = _random_joint_values(robot, rng)
    links = list(robot.links)
    frames = [model.getFrameId(link, pin.BODY) for link in links]
    poses = np.empty((N, len(links), 4, 4))
    jacs = np.empty((N, len(links), 6, model.nv))
    for i in range(N):
        q = _pin_q(model, robot, values, i)
        pin.computeJointJacobians(model, data, q)  # also runs forward kinematics
        pin.updateFramePlacements(model, data)
        for k, fid in enumerate(frames):
            poses[i, k] = data.oMf[fid].homogeneous
            jacs[i, k] = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)

    # Robot.fk: every link from the root, from a name -> value mapping.
    for i in range(N):
        positions = {n: (v[i, 0] if v.shape[1] == 1 else v[i]) for n, v in values.items()}
        fk = robot.fk(positions)
        got = np.array([fk[link] for link in links])
        np.testing.assert_allclose(got, poses[i], rtol=0, atol=TOL)

    # Chain from the root to every link: batched FK and Jacobian, and the single-call path.
    v_index = {model.names[j]: model.joints[j].idx_v for j in range(1, model.njoints)}
    for k, link in enumerate(links):
        chain = robot.path_between(robot.root_link, link)
        q = np.zeros((N, chain.dof))
        select = np.zeros((model.nv, chain.dof))
        for col, (joint, dof_index) in enumerate(chain.jacobian_columns):
            q[:, col] = values[joint][:, dof_index]
            select[v_index[joint] + dof_index, col] = 1.0
        for follower in robot.joints:
            mimic = robot.leader(follower)
            if mimic is not None and (mimic.joint, 0) in chain.jacobian_columns:
                col = chain.jacobian_columns.index((mimic.joint, 0))
                select[v_index[follower], col] += mimic.multiplier
        want_j = jacs[:, k] @ select
        t, j = chain.fk_jacobian_batch(q)
        np.testing.assert_allclose(t, poses[:, k], rtol=0, atol=TOL, err_msg=link)
        np.testing.assert_allclose(j, want_j, rtol=0, atol=TOL, err_msg=link)
        # The single-call (generated) path, on every configuration too.
        single = [chain.fk_jacobian(q[i]) for i in range(N)]
        single_t = np.array([pose for pose, _ in single])
        single_j = np.array([jac for _, jac in single])
        np.testing.assert_allclose(single_t, poses[:, k], rtol=0, atol=TOL, err_msg=link)
        np.testing.assert_allclose(single_j, want_j, rtol=0, atol=TOL, err_msg=link)
        fk_only = np.array([chain.fk(q[i]) for i in range(N)])
        np.testing.assert_allclose(fk_only, poses[:, k], rtol=0, atol=TOL, err_msg=link)
        on_chain = [links.index(name) for name in chain.links]
        middle = chain.links[len(chain.links) // 2]  # an intermediate link when there is one
        m = links.index(middle)
        for i in range(0, N, 25):
            got = chain.link_poses(q[i])
            np.testing.assert_allclose(
                np.array([got[name] for name in chain.links]),
                poses[i, on_chain],
                rtol=0,
                atol=TOL,
            )
            j_mid = chain.jacobian_at(middle, q[i])
            np.testing.assert_allclose(j_mid, jacs[i, m] @ select, rtol=0, atol=TOL)


@pytest.mark.parametrize(
    ("name", "source", "targets"),
    [
        ("hexapod", "base_link", [f"leg{i}_foot" for i in range(1, 7)]),
        ("bimanual", "torso", ["left_tool", "right_tool"]),
        ("ur5", "upper_arm_link", ["tool0", "wrist_2_link"]),
    ],
)
def test_chains_from_an_inner_source_are_expressed_in_the_source_frame(
    name: str, source: str, targets: list[str]
) -> None:
    xml = urdf_text(name)
    robot = load_urdf(xml)
    model = pin.buildModelFromXML(xml)
    data = model.createData()
    rng = np.random.default_rng(7)
    values = _random_joint_values(robot, rng)
    v_index = {model.names[j]: model.joints[j].idx_v for j in range(1, model.njoints)}
    sid = model.getFrameId(source, pin.BODY)
    for i in range(50):
        q = _pin_q(model, robot, values, i)
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        src = data.oMf[sid].homogeneous
        rot = np.kron(np.eye(2), src[:3, :3].T)
        for target in targets:
            chain = robot.path_between(source, target)
            cols = [v_index[n] + d for n, d in chain.jacobian_columns]
            qc = np.array([values[n][i, d] for n, d in chain.jacobian_columns])
            tid = model.getFrameId(target, pin.BODY)
            want_t = spatial.inverse_transform(src) @ data.oMf[tid].homogeneous
            want_j = rot @ pin.getFrameJacobian(model, data, tid, pin.LOCAL_WORLD_ALIGNED)[:, cols]
            t, j = chain.fk_jacobian(qc)
            np.testing.assert_allclose(t, want_t, rtol=0, atol=TOL)
            np.testing.assert_allclose(j, want_j, rtol=0, atol=TOL)


PLANAR = """
<robot name="rover">
  <link name="world"/> <link name="base"/> <link name="mast"/> <link name="tip"/>
  <joint name="drive" type="planar">
    <parent link="world"/> <child link="base"/> <origin xyz="0.1 0.2 0.3" rpy="0.1 0.2 0.3"/>
    <axis xyz="0 0 1"/>
  </joint>
  <joint name="pan" type="revolute">
    <parent link="base"/> <child link="mast"/> <origin xyz="0.3 0.1 0.2"/> <axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" velocity="1" effort="1"/>
  </joint>
  <joint name="tip_joint" type="fixed">
    <parent link="mast"/> <child link="tip"/> <origin xyz="0 0 0.4"/>
  </joint>
</robot>
"""


def test_planar_joint_matches_pinocchio() -> None:
    # pinocchio's planar joint: q = (x, y, cos theta, sin theta), velocity (vx, vy, w) in the
    # joint's moving frame; ours: q = (x, y, theta) integrated by addition in the joint frame
    # before the motion, so our columns are pinocchio's times (R(theta)^T, 1).
    robot = load_urdf(PLANAR)
    model = pin.buildModelFromXML(PLANAR)
    data = model.createData()
    chain = robot.path_between("world", "tip")
    fid = model.getFrameId("tip", pin.BODY)
    rng = np.random.default_rng(11)
    for _ in range(100):
        x, y, theta, pan = rng.uniform(-2, 2, size=4)
        q = np.array([x, y, np.cos(theta), np.sin(theta), pan])
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        c, s = np.cos(theta), np.sin(theta)
        tangent = np.zeros((4, 4))
        tangent[:2, :2] = [[c, s], [-s, c]]
        tangent[2, 2] = tangent[3, 3] = 1.0
        want_j = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED) @ tangent
        t, j = chain.fk_jacobian(np.array([x, y, theta, pan]))
        np.testing.assert_allclose(t, data.oMf[fid].homogeneous, rtol=0, atol=TOL)
        np.testing.assert_allclose(j, want_j, rtol=0, atol=TOL)
