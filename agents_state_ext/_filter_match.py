"""Which offered items a ``call_model_input_filter`` rewrote, and which it left out.

A returned item the filter made (not one of the offered objects) stands for an offered item of
its kind (the same type and role, or the same call id) that the filter did not return; of
several such, the one it resembles most. The rest of what the filter did not return was left
out, and stays pending.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

from ._items import item_to_dict

__all__ = ["match_filtered"]


def match_filtered(offered: list[Any], returned: list[Any]) -> tuple[list[Any], list[Any]]:
    """The offered items ``returned`` carries rewritten copies of, and those left out."""
    kept = {id(item) for item in returned}
    offered_ids = {id(item) for item in offered}
    left = [item for item in offered if id(item) not in kept]
    replaced = []
    for item in returned:
        if id(item) in offered_ids:
            continue
        key = _slot(item)
        candidates = [index for index, other in enumerate(left) if _slot(other) == key]
        if not candidates:
            continue
        if len(candidates) > 1:
            # Of several left-out items of its kind, a copy stands for the one it resembles
            # most (the first on a tie): the others were dropped and stay pending.
            candidates.sort(key=lambda index: -_likeness(left[index], item))
        replaced.append(left.pop(candidates[0]))
    return replaced, left


def _likeness(original: Any, copy: Any) -> float:
    """How much a filter's ``copy`` resembles ``original`` (0..1), case aside."""
    first, second = (
        json.dumps(item_to_dict(i), sort_keys=True, default=str).casefold()
        for i in (original, copy)
    )
    return difflib.SequenceMatcher(None, first, second).ratio()


def _slot(item: Any) -> tuple[Any, ...]:
    """What a filter's rewritten copy of ``item`` keeps: its type and role, or its call id."""
    if not isinstance(item, Mapping):
        return ("other", type(item).__name__)
    kind = item.get("type") or ("message" if "role" in item else None)
    call_id = item.get("call_id")
    if call_id is not None:
        return (kind, call_id)
    return (kind, item.get("role"))
