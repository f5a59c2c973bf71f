"""``HILBOT_REQUIRE_LEROBOT=1`` (CI) turns a skipped LeRobot test into a failed one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def _pytest(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HILBOT_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(HERE / "test_lerobot_motor_buses.py"), "-k", "scan_finds_the_arm"],
        capture_output=True, text=True, timeout=300, env={**clean, **env}, cwd=HERE.parent.parent,
    )  # fmt: skip


def test_a_skipped_lerobot_test_fails_where_lerobot_is_required() -> None:
    skipped = _pytest()
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout
    required = _pytest(HILBOT_REQUIRE_LEROBOT="1")
    assert required.returncode != 0, required.stdout
    assert "HILBOT_REQUIRE_LEROBOT=1 says LeRobot's tests must run" in required.stdout
    assert "HILBOT_LEROBOT_PYTHON (a python with lerobot) is not set" in required.stdout
