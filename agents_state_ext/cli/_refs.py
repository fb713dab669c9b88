"""How ``chat`` names messages and attempts: one kind of reference for every command.

``/edit``, ``/switch`` and ``/explain`` take the same reference: an id or a prefix of one (as
the chat shows them: ``msg_1a2b3c4d``), or the number of a message on ``/path`` (an alias).
An ambiguous prefix lists the ids it matches. Statuses read the way they happened: an answer
that was stopped and then edited away is ``invalid (was cancelled)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from openai import APIConnectionError, APITimeoutError

from .._nodes import Node
from ..errors import InvalidTargetError, NodeNotFoundError

__all__ = ["describe_error", "pick", "reference", "short_ids", "status_text"]

_SHOWN = 12  # "msg_" and 8 hex digits: what the chat prints of a generated id


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each id's shortest shown prefix (at least 12 characters) that no other id starts with."""
    ids = list(dict.fromkeys(ids))
    shown: dict[str, str] = {}
    for one in ids:
        size = min(_SHOWN, len(one))
        while size < len(one) and any(o != one and o.startswith(one[:size]) for o in ids):
            size += 1
        shown[one] = one[:size]
    return shown


def pick(ids: Iterable[str], ref: str, what: str = "message") -> str:
    """The one id that is ``ref`` or starts with it; an ambiguous ``ref`` lists its matches."""
    ids = list(dict.fromkeys(ids))
    if ref in ids:
        return ref
    matches = [i for i in ids if i.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NodeNotFoundError(f"{what} id {ref!r} matches nothing")
    shown = short_ids(ids)
    listed = ", ".join(shown[m] for m in matches[:8])
    more = f" and {len(matches) - 8} more" if len(matches) > 8 else ""
    raise NodeNotFoundError(
        f"{what} id {ref!r} is ambiguous: it matches {listed}{more}; type more of it"
    )


def reference(
    ref: str,
    path: Sequence[Node],
    ids: Iterable[str],
    *,
    what: str = "message",
) -> str:
    """The id ``ref`` names: a number of ``/path`` (1 is its first message) or an id prefix."""
    if ref.isdigit():
        number = int(ref)
        if not 1 <= number <= len(path):
            raise InvalidTargetError(
                f"there is no message {number} on the active branch "
                f"(/path numbers them 1 to {len(path)})"
            )
        return path[number - 1].id
    return pick(ids, ref, what)


def status_text(node: Node) -> str:
    """A node's status, with what it was before an edit made it invalid."""
    before = node.meta.get("status_before_invalid")
    if node.status == "invalid" and before and before != "complete":
        return f"invalid (was {before})"
    return node.status


def describe_error(error: BaseException | None) -> str | None:
    """A connection error as one line that names the URL it could not reach; else ``None``."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, APIConnectionError):
            url = error.request.url
            what = "timed out" if isinstance(error, APITimeoutError) else "failed"
            return f"connection to {url} {what} ({error}); check the address (OPENAI_BASE_URL)"
        error = error.__cause__ or error.__context__
    return None
