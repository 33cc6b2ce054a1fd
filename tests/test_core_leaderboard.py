"""The index's cross-task ranking: per-task orders combined by normalised rank."""

from __future__ import annotations

import pytest

from relbench.leaderboard import cross_task_ranking


def test_ranks_are_normalised_within_each_task():
    # "a" wins a two-way task and is 8th of 10 in another; "b" is 2nd in both. Being last of
    # two weighs as much as being last of ten, so "a" ranks above "b" although its mean
    # ordinal rank is worse.
    orders = {"small": ["a", "b"], "large": ["c", "b", *"defgh", "a", "i", "j"]}
    rows = {k: (norm, rank, n) for k, norm, rank, n in cross_task_ranking(orders)}
    assert rows["a"] == (pytest.approx((0 + 7 / 9) / 2), 4.5, 2)
    assert rows["b"] == (pytest.approx((1 + 1 / 9) / 2), 2.0, 2)
    assert rows["c"] == (0.0, 1.0, 1)
    order = [k for k, *_ in cross_task_ranking(orders)]
    assert order[0] == "c" and order.index("a") < order.index("b")


def test_ties_prefer_more_tasks_and_single_entry_tasks_count_as_best():
    rows = cross_task_ranking({"t1": ["x"], "t2": ["y", "z"], "t3": ["y"]})
    assert [(k, n) for k, _, _, n in rows] == [("y", 2), ("x", 1), ("z", 1)]
