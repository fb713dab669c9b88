"""The turns of a path, their costs, and the pick of those that fit a budget, newest first.

A walk newest→oldest takes a run of consecutive turns that fit together in one binary search
over running totals, stops as soon as the remaining budget is below the cheapest older turn
(a prefix minimum), and jumps over a run of turns too big to fit by following, from a turn
that does not fit, the pointer to the nearest older turn that is cheaper. All three are kept
per conversation in a :class:`ContextIndex`, which also holds the counts, so a build's walk
costs the runs it takes and the few turns it jumps through, not the turns it keeps.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

__all__ = ["Turns"]


class Turns:
    """Turn costs in time order with the indexes that let a walk skip what cannot fit.

    ``total[k]`` is the cost of the turns before turn ``k``, so a run of consecutive turns
    that fits is found by one binary search instead of a step per turn.
    """

    def __init__(self) -> None:
        self.cost: list[int] = []
        self.total: list[int] = [0]
        self.prefix_min: list[int] = []
        # prev_cheaper[j]: the nearest older turn strictly cheaper than turn j, or -1.
        self.prev_cheaper: list[int] = []

    def append(self, cost: int) -> None:
        self.extend((cost,))

    def extend(self, costs: Sequence[int]) -> None:
        cost, total = self.cost, self.total
        prefix_min, prev_cheaper = self.prefix_min, self.prev_cheaper
        low = prefix_min[-1] if prefix_min else None
        running = total[-1]
        for c in costs:
            older = len(cost) - 1
            while older >= 0 and cost[older] >= c:
                older = prev_cheaper[older]
            cost.append(c)
            running += c
            total.append(running)
            if low is None or c < low:
                low = c
            prefix_min.append(low)
            prev_cheaper.append(older)

    def truncate(self, n: int) -> None:
        del self.cost[n:], self.total[n + 1 :], self.prefix_min[n:], self.prev_cheaper[n:]

    def pick(self, remaining: int) -> tuple[list[int], int]:
        """Turns picked newest first for a budget of ``remaining``, and what is left over.

        Newest first, a turn that fits is taken and one that does not is skipped. A run of
        turns taken back to back is found in one binary search over the running totals; a
        skipped turn leads, through ``prev_cheaper``, to the next older turn that can fit.
        """
        cost, total = self.cost, self.total
        prefix_min, prev_cheaper = self.prefix_min, self.prev_cheaper
        picked: list[int] = []
        j = len(cost) - 1
        while j >= 0 and prefix_min[j] <= remaining:
            if cost[j] <= remaining:
                # The oldest turn `first` with turns first..j fitting together; the turn
                # before it does not fit in what they leave.
                end = total[j + 1]
                first = bisect_left(total, end - remaining, 0, j)
                picked += range(j, first - 1, -1)
                remaining -= end - total[first]
                j = first - 1
            else:
                # Every turn between prev_cheaper[j] and j costs at least cost[j]: none fits.
                j = prev_cheaper[j]
        return picked, remaining
