"""The demo patterns and jog keys of the teleop client (pure)."""

import math

import numpy as np
import pytest

from hilbot.driver.teleop.publisher import Pattern, Plane, jog_step, pattern_offset


@pytest.mark.parametrize("pattern", [Pattern.CIRCLE, Pattern.FIGURE8])
def test_patterns_start_at_the_present_position_and_stay_in_their_plane(pattern):
    np.testing.assert_allclose(pattern_offset(pattern, 0.0, 0.05), 0.0, atol=1e-12)
    phases = np.linspace(0, 2 * math.pi, 50)
    points = np.array([pattern_offset(pattern, p, 0.05, Plane.XZ) for p in phases])
    assert np.all(points[:, 1] == 0.0)
    assert np.max(np.linalg.norm(points, axis=1)) <= 0.1 + 1e-12
    np.testing.assert_allclose(points[0], points[-1], atol=1e-12)  # closed


def test_jog_keys():
    np.testing.assert_allclose(jog_step("r", 0.01), [0, 0, 0.01])
    assert jog_step("?", 0.01) is None
    with pytest.raises(ValueError, match="keyboard"):
        pattern_offset(Pattern.JOG, 0.0, 0.01)
