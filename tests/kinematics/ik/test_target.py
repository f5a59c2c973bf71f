"""Target parsing: every accepted form, and a clear ``InvalidTarget`` for the rest."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hilbot.kinematics import spatial
from hilbot.kinematics.ik import InvalidTarget, OrientationKind, Target, parse_target

P = np.array([0.1, -0.2, 0.3])
R = spatial.rpy_to_matrix([0.3, -0.2, 1.1])
Q = spatial.matrix_to_quat(R)


def _transform() -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = R
    t[:3, 3] = P
    return t


def test_position_forms():
    for value in (P, P.tolist(), tuple(P.tolist()), (P, None)):
        target = parse_target(value)
        assert target.kind is OrientationKind.NONE
        assert target.point == tuple(P.tolist())
        assert target.rotation is None and target.axis is None and target.rows == 3


FULL_FORMS = [(P, Q), (P, R), _transform(), (P.tolist(), R.tolist())]


@pytest.mark.parametrize("value", FULL_FORMS, ids=["quat", "R", "T", "lists"])
def test_full_orientation_forms(value):
    target = parse_target(value)
    assert target.kind is OrientationKind.FULL and target.rows == 6
    np.testing.assert_allclose(target.position, P)
    np.testing.assert_allclose(target.rotation, R, atol=1e-12)
    np.testing.assert_allclose(target.transform(), _transform(), atol=1e-12)


def test_axis_is_normalised():
    target = parse_target((P, [0.0, 0.0, -2.0]))
    assert target.kind is OrientationKind.AXIS
    np.testing.assert_allclose(target.axis, [0.0, 0.0, -1.0])
    assert target.rotation is None


def test_target_passes_through_and_is_frozen():
    target = parse_target(_transform())
    assert parse_target(target) is target
    with pytest.raises(AttributeError):
        target.point = (0.0, 0.0, 0.0)  # type: ignore[misc]


def test_caller_arrays_are_not_aliased():
    t = _transform()
    target = parse_target(t)
    t[0, 3] = 99.0
    assert target.point[0] == pytest.approx(0.1)


BAD = [
    (np.array([0.1, math.nan, 0.0]), "NaN"),
    (np.array([0.1, math.inf, 0.0]), "NaN or infinite"),
    ((P, [math.nan, 0.0, 0.0, 1.0]), "NaN"),
    ((P, np.full((3, 3), math.inf)), "NaN"),
    ((P, [0.0, 0.0, -math.inf]), "NaN"),
    (np.where(np.eye(4) > 0, math.nan, 0.0), "NaN"),
    (np.zeros(2), "unsupported shape"),
    (np.zeros((3, 3)), "unsupported shape"),
    ((np.zeros(2), None), "position must have shape"),
    ((P, np.zeros(5)), "orientation must be"),
    ((P, [1.0, 0.0, 0.0, 0.5]), "unit norm"),
    ((P, 2.0 * np.eye(3)), "not orthonormal"),
    ((P, np.diag([1.0, 1.0, -1.0])), "reflection"),
    ((P, [0.0, 0.0, 0.0]), "zero length"),
    (np.vstack([_transform()[:3], [0.0, 0.0, 1.0, 1.0]]), "last row"),
    ("abc", "not numeric"),
    ((P, "up"), "not numeric"),
]


@pytest.mark.parametrize(("value", "reason"), BAD, ids=[r for _, r in BAD])
def test_invalid_targets_carry_reason_and_value(value, reason):
    with pytest.raises(InvalidTarget) as info:
        parse_target(value)
    assert reason in info.value.reason
    assert info.value.value is value
    assert "expected a position" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_quaternion_needs_unit_norm_within_tolerance():
    near = np.array(Q) * (1.0 + 5e-5)
    np.testing.assert_allclose(parse_target((P, near)).rotation, R, atol=1e-9)


def test_target_dataclass_roundtrip():
    target = Target((1.0, 2.0, 3.0))
    np.testing.assert_allclose(target.transform()[:3, 3], [1.0, 2.0, 3.0])
