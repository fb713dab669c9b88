"""The tracker's serialized form: its version, and the codecs its parts share.

Each part of :class:`~agents_state_ext.ServerConversationTracker` writes and reads its own
state; this module holds what they have in common: the version check and the codecs of item
lists and of the undelivered response.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from ._items import item_to_dict
from .errors import StateBlobError

TRACKER_VERSION = 3
# Changelog of the serialized form (to_dict):
#   1: first version.
#   2: open calls, unsent tool outputs, repairs, the open-calls policy and the undelivered
#      response; journal entries name the calls each response opened and closed. Version 1
#      data reads as having none.
#   3: the cursors a compaction or re-seed replaced (superseded), and the acknowledged ids the
#      current chain does not count (retired_ids: from before the newest restart, and
#      reasoning). Older data reads as superseding nothing and counting no id.


def check_version(data: Any) -> None:
    """Raise ``StateBlobError`` unless ``data`` is a tracker dump of a version this reads."""
    if not isinstance(data, Mapping):
        raise StateBlobError("tracker state must be a JSON object")
    version = data.get("version")
    if not isinstance(version, int) or version > TRACKER_VERSION or version < 1:
        raise StateBlobError(
            f"unsupported tracker state version {version!r} "
            f"(this library reads versions 1..{TRACKER_VERSION})"
        )


def dump_items(items: Iterable[Any]) -> list[dict[str, Any]]:
    """JSON-ready copies of ``items`` (SDK objects or dicts); the caller's objects are kept."""
    return [copy.deepcopy(item_to_dict(i)) for i in items]


def load_items(data: Iterable[Any]) -> list[dict[str, Any]]:
    """Items read back from :func:`dump_items`."""
    return [dict(i) for i in data]


def strings(data: Iterable[Any]) -> list[str]:
    """A list of ids read back (each as a string)."""
    return [str(i) for i in data]


def dump_undelivered(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """The undelivered response (``{"response_id", "output"}``) JSON-ready, or ``None``."""
    if entry is None:
        return None
    return {"response_id": entry["response_id"], "output": dump_items(entry["output"])}


def load_undelivered(data: Any) -> dict[str, Any] | None:
    """The undelivered response read back from :func:`dump_undelivered`."""
    if data is None:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("output"), list):
        raise TypeError("undelivered must be an object with an output list")
    response_id = data.get("response_id")
    if response_id is not None and not isinstance(response_id, str):
        raise TypeError("undelivered response_id must be a string")
    return {"response_id": response_id, "output": load_items(data["output"])}
