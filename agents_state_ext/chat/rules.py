"""The chat's small rules that its book of writes shares with the rest of it.

Which settings are valid, how a record is marked with a status, and where a request part is
kept. They sit below :mod:`.held` and :mod:`.writes`; :mod:`.records` re-exports them.
"""

from __future__ import annotations

import time

from .._attempts import AttemptRecord
from .._status import FINAL
from ..types import AttemptStatus

__all__ = ["PART_PREFIX", "check_budget", "check_prompt_version", "mark"]

PART_PREFIX = "request_part:"
"""Chat metadata keys holding a request part (instructions, tool list) by its digest."""


def check_budget(budget: object) -> int | None:
    """``budget`` if it is ``None`` or a positive int, else ``ValueError``."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"the token budget must be a positive integer, got {budget!r}")
    return budget


def check_prompt_version(value: object) -> str | None:
    """``value`` if it is ``None`` or text, else ``TypeError``."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"prompt_version must be a str or None, got {type(value).__name__}")
    return value


def mark(record: AttemptRecord, status: AttemptStatus, *, error: str | None = None) -> None:
    """Set ``record``'s status (and error); a final one gets its ``finished_at``."""
    record.status = status
    if error is not None:
        record.error = error
    if status in FINAL:
        record.finished_at = time.time()
