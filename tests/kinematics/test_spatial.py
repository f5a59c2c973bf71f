"""Property tests (seeded hypothesis) for the spatial math: round trips and group axioms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from hilbot.kinematics import spatial

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
unit = st.floats(-1.0, 1.0, allow_nan=False)


@st.composite
def rotvecs(draw: st.DrawFn, max_angle: float = math.pi - 1e-6) -> np.ndarray:
    """Rotation vectors with angle in [0, max_angle], including tiny ones."""
    axis = np.array([draw(unit), draw(unit), draw(unit)])
    norm = np.linalg.norm(axis)
    if norm < 1e-3:
        axis, norm = np.array([0.0, 0.0, 1.0]), 1.0
    angle = draw(st.one_of(st.floats(0.0, 1e-7), st.floats(0.0, max_angle)))
    return axis / norm * angle


@st.composite
def rotations(draw: st.DrawFn) -> np.ndarray:
    return spatial.so3_exp(draw(rotvecs(math.pi)))


@st.composite
def transforms(draw: st.DrawFn) -> np.ndarray:
    return spatial.transform(draw(rotations()), [draw(finite), draw(finite), draw(finite)])


@st.composite
def twists(draw: st.DrawFn) -> np.ndarray:
    v = [draw(st.floats(-10, 10)) for _ in range(3)]
    return np.concatenate([v, draw(rotvecs())])


SETTINGS = settings(max_examples=100, deadline=None, derandomize=True)


def same_rotation_vector(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(spatial.so3_exp(a), spatial.so3_exp(b), atol=1e-9)


@seed(1)
@SETTINGS
@given(rotations())
def test_quaternion_matrix_round_trip(r: np.ndarray) -> None:
    q = spatial.matrix_to_quat(r)
    assert abs(np.linalg.norm(q) - 1.0) < 1e-12 and q[0] >= 0.0
    np.testing.assert_allclose(spatial.quat_to_matrix(q), r, atol=1e-12)
    assert spatial.is_rotation(r)


@seed(2)
@SETTINGS
@given(rotations())
def test_rpy_round_trip(r: np.ndarray) -> None:
    rpy = spatial.matrix_to_rpy(r)
    assert -math.pi / 2 - 1e-12 <= rpy[1] <= math.pi / 2 + 1e-12
    np.testing.assert_allclose(spatial.rpy_to_matrix(rpy), r, atol=1e-9)
    np.testing.assert_allclose(spatial.quat_to_matrix(spatial.rpy_to_quat(rpy)), r, atol=1e-9)
    np.testing.assert_allclose(spatial.quat_to_rpy(spatial.matrix_to_quat(r)), rpy, atol=1e-7)


def test_rpy_is_fixed_axis_xyz_and_handles_gimbal_lock() -> None:
    r, p, y = 0.3, -0.4, 1.1
    want = spatial.rot_z(y) @ spatial.rot_y(p) @ spatial.rot_x(r)
    np.testing.assert_allclose(spatial.rpy_to_matrix([r, p, y]), want, atol=1e-15)
    locked = spatial.rpy_to_matrix([0.5, math.pi / 2, 0.2])
    np.testing.assert_allclose(
        spatial.rpy_to_matrix(spatial.matrix_to_rpy(locked)), locked, atol=1e-9
    )


@seed(3)
@SETTINGS
@given(rotvecs())
def test_exp_log_round_trip_so3(w: np.ndarray) -> None:
    np.testing.assert_allclose(spatial.so3_log(spatial.so3_exp(w)), w, atol=1e-9)
    q = spatial.rotvec_to_quat(w)
    np.testing.assert_allclose(spatial.quat_to_rotvec(q), w, atol=1e-9)
    np.testing.assert_allclose(spatial.quat_to_matrix(q), spatial.so3_exp(w), atol=1e-12)
    axis, angle = spatial.matrix_to_axis_angle(spatial.so3_exp(w))
    np.testing.assert_allclose(axis * angle, w, atol=1e-9)
    np.testing.assert_allclose(
        spatial.axis_angle_to_matrix(axis * 3.0, angle), spatial.so3_exp(w), atol=1e-12
    )
    np.testing.assert_allclose(spatial.so3_exp_batch(w[None])[0], spatial.so3_exp(w), atol=1e-15)


def test_log_at_half_turn_is_accurate() -> None:
    for axis in np.eye(3):
        w = spatial.so3_log(spatial.so3_exp(math.pi * axis))
        assert abs(np.linalg.norm(w) - math.pi) < 1e-12
        same_rotation_vector(w, math.pi * axis)


@seed(4)
@SETTINGS
@given(twists())
def test_exp_log_round_trip_se3(xi: np.ndarray) -> None:
    t = spatial.se3_exp(xi)
    np.testing.assert_allclose(spatial.se3_log(t), xi, atol=1e-8)
    np.testing.assert_allclose(spatial.se3_exp(spatial.se3_log(t)), t, atol=1e-9)


@seed(5)
@SETTINGS
@given(rotvecs(), rotvecs(), rotvecs())
def test_so3_group_axioms(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    ra, rb, rc = (spatial.so3_exp(x) for x in (a, b, c))
    np.testing.assert_allclose((ra @ rb) @ rc, ra @ (rb @ rc), atol=1e-12)  # associativity
    np.testing.assert_allclose(ra @ np.eye(3), ra, atol=0)  # identity
    np.testing.assert_allclose(ra @ spatial.so3_exp(-a), np.eye(3), atol=1e-12)  # inverse
    assert spatial.is_rotation(ra @ rb)  # closure
    qa, qb = spatial.matrix_to_quat(ra), spatial.matrix_to_quat(rb)
    np.testing.assert_allclose(
        spatial.quat_to_matrix(spatial.quat_multiply(qa, qb)), ra @ rb, atol=1e-12
    )
    np.testing.assert_allclose(spatial.quat_to_matrix(spatial.quat_conjugate(qa)), ra.T, atol=1e-12)


@seed(6)
@SETTINGS
@given(transforms(), transforms(), transforms(), twists())
def test_se3_group_axioms(a: np.ndarray, b: np.ndarray, c: np.ndarray, xi: np.ndarray) -> None:
    np.testing.assert_allclose((a @ b) @ c, a @ (b @ c), atol=1e-9)
    np.testing.assert_allclose(a @ spatial.inverse_transform(a), np.eye(4), atol=1e-9)
    np.testing.assert_allclose(
        spatial.inverse_transform(a @ b),
        spatial.inverse_transform(b) @ spatial.inverse_transform(a),
        atol=1e-9,
    )
    # Adjoint: T exp(xi) T^-1 == exp(Ad(T) xi).
    lhs = a @ spatial.se3_exp(xi) @ spatial.inverse_transform(a)
    np.testing.assert_allclose(spatial.se3_exp(spatial.adjoint(a) @ xi), lhs, atol=1e-8)


@seed(7)
@SETTINGS
@given(transforms(), twists())
def test_pose_error_measures_the_displacement(current: np.ndarray, xi: np.ndarray) -> None:
    # Move the current pose by a rotation about its own origin and a translation (both in the
    # common frame): pose_error must give back exactly that translation and rotation vector.
    target = current.copy()
    target[:3, :3] = spatial.so3_exp(xi[3:]) @ current[:3, :3]
    target[:3, 3] += xi[:3]
    dp, dw = spatial.pose_error(current, target)
    np.testing.assert_allclose(dp, xi[:3], atol=1e-9)
    np.testing.assert_allclose(dw, xi[3:], atol=1e-9)
    zero_p, zero_w = spatial.pose_error(current, current)
    assert not zero_p.any() and np.linalg.norm(zero_w) < 1e-12


@seed(8)
@SETTINGS
@given(st.lists(unit, min_size=3, max_size=3), st.lists(unit, min_size=3, max_size=3))
def test_rotation_between(a: list[float], b: list[float]) -> None:
    u, v = np.array(a), np.array(b)
    if np.linalg.norm(u) < 1e-3 or np.linalg.norm(v) < 1e-3:
        return
    r = spatial.rotation_between(u, v)
    assert spatial.is_rotation(r)
    np.testing.assert_allclose(r @ (u / np.linalg.norm(u)), v / np.linalg.norm(v), atol=1e-9)


def test_rotation_between_opposite_directions() -> None:
    r = spatial.rotation_between([0, 0, 1.0], [0, 0, -1.0])
    np.testing.assert_allclose(r @ [0, 0, 1.0], [0, 0, -1.0], atol=1e-12)


def test_skew_and_bad_shapes() -> None:
    v, u = np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.1, -4.0])
    np.testing.assert_allclose(spatial.skew(v) @ u, np.cross(v, u), atol=1e-15)
    np.testing.assert_allclose(spatial.unskew(spatial.skew(v)), v)
    with pytest.raises(ValueError, match="shape"):
        spatial.so3_exp([1.0, 2.0])
    with pytest.raises(ValueError, match="zero quaternion"):
        spatial.quat_to_matrix([0, 0, 0, 0])
    with pytest.raises(ValueError, match="axis must not be zero"):
        spatial.axis_angle_to_matrix([0, 0, 0], 1.0)
    with pytest.raises(ValueError, match=r"\(4, 4\)"):
        spatial.pose_error(np.eye(3), np.eye(4))
