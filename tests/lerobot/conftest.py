"""LeRobot's own code against hilbot: a skip is a failure where LeRobot must be there.

The tests in this folder run LeRobot in its own environment (``HILBOT_LEROBOT_PYTHON``
names its python) and are skipped without it. CI installs LeRobot and sets
``HILBOT_REQUIRE_LEROBOT=1``: there, a test of this folder that was skipped (for any
reason: no LeRobot python, a missing module) fails instead, so CI cannot pass without
having run them.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

REQUIRED = os.environ.get("HILBOT_REQUIRE_LEROBOT", "") not in ("", "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    """With ``HILBOT_REQUIRE_LEROBOT=1``, a skipped test of this folder is a failed one."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if REQUIRED and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (
            f"skipped, but HILBOT_REQUIRE_LEROBOT=1 says LeRobot's tests must run: {reason}"
        )
