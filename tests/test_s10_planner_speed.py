"""The planner's search tables (tenth session): the subsets it scores, cached or streamed, are
the combinations the exhaustive search has always scored, in the same order."""

from __future__ import annotations

from itertools import combinations

from promptcache import planner as pl
from promptcache.catalog import get_policy
from promptcache.prefix import render


def _expected(n: int, kmax: int) -> list[tuple[int, tuple[int, ...], int]]:
    return [(k, pos, sum(1 << j for j in pos)) for k in range(1, kmax + 1)
            for pos in combinations(range(n), k)]


def test_subset_tables_list_every_combination_in_order() -> None:
    for n in range(0, 9):
        for kmax in range(0, n + 2):
            assert list(pl._subsets(n, kmax)) == _expected(n, kmax)
            assert list(pl._subsets(n, kmax)) == _expected(n, kmax)  # the cached table
    # over 4,096 subsets: made as the search goes, never kept
    big = pl._subsets(16, 6)
    assert not isinstance(big, tuple) and (16, 6) not in pl._SUBSETS
    assert list(big) == _expected(16, 6)


def test_a_policy_with_more_slots_than_the_cached_tables_still_plans_by_the_rules() -> None:
    msgs = [{"role": "user" if t % 2 == 0 else "assistant", "content": "word " * 200}
            for t in range(301)]
    view = render({"model": "claude-sonnet-4-6", "max_tokens": 5, "system": "s " * 1500,
                   "messages": msgs})
    policy = get_policy("claude-sonnet-4-6").model_copy(update={"max_breakpoints": 5})
    plan = pl.plan_breakpoints(view, policy, list(range(5, 300, 13)))
    assert sum(1 for d in plan.decisions if d.role == "lagging") > 16  # the search is trimmed
    assert 0 < plan.marker_count <= 5
    assert plan.read_tokens is not None and plan.read_tokens > 0
