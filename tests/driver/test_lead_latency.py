"""``LeadLatency``: each leader reading is timed to the first follower goal written with it."""

from __future__ import annotations

import pytest

from hilbot.driver.lead.latency import LeadLatency


def test_a_target_is_timed_from_its_read_to_the_next_goal_write() -> None:
    latency = LeadLatency()
    latency.published(10.000, {"a": 0.5, "b": -0.25})
    latency.written(10.001)  # a goal before the target arrived: not its
    latency.arrived({"b": -0.25, "a": 0.5})  # the same values, another order (JSON)
    latency.written(10.004)
    latency.written(10.014)  # later goals are not the first
    assert list(latency.samples) == pytest.approx([0.004])


def test_targets_taken_in_together_are_each_timed_to_the_same_write() -> None:
    latency = LeadLatency()
    latency.published(1.00, {"a": 1.0})
    latency.published(1.01, {"a": 2.0})
    latency.arrived({"a": 1.0})
    latency.arrived({"a": 2.0})
    latency.written(1.02)
    assert list(latency.samples) == pytest.approx([0.02, 0.01])


def test_targets_the_leader_did_not_send_are_not_timed() -> None:
    latency = LeadLatency()
    latency.published(1.0, {"a": 1.0})
    latency.arrived({"a": 1.5})  # another sender's, or changed on the way
    latency.written(1.1)
    assert not latency.samples and latency.summary() is None


def test_the_summary_gives_the_median_and_the_99th_percentile() -> None:
    latency = LeadLatency()
    for k in range(100):
        latency.published(float(k), {"a": float(k)})
        latency.arrived({"a": float(k)})
        latency.written(k + 0.001 * (k + 1))
    assert latency.summary() == "leader read -> follower goal 50.5 ms median, 99.0 ms p99"
