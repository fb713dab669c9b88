"""Token counts kept in the store, so a reopened chat selects its context without counting.

A chat whose counter is a :class:`~agents_state_ext.TokenCounter` on a store with the
:class:`~agents_state_ext.stores.TokenCountStore` capability stores the count of each message
whose content is final (user and system messages, complete answers) once, keyed by the
counter's encoding, and a chat opened on that store trusts them (``TokenCounter.trust``).
Another counter, or a store without the capability, counts as before. Both the chat and
``import_session`` store counts, so this sits with the stores, below either.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._nodes import Node
from .._tokens import MessageCounter, TokenCounter
from .base import ConversationStore, TokenCountStore

__all__ = ["load_counts", "save_counts"]


async def load_counts(store: ConversationStore, conversation_id: str, counter: object) -> None:
    """Make ``counter`` trust the counts stored for the chat in its encoding."""
    if isinstance(counter, TokenCounter) and isinstance(store, TokenCountStore):
        counter.trust(await store.get_token_counts(conversation_id, counter.encoding_name))


async def save_counts(
    store: ConversationStore,
    conversation_id: str,
    counter: MessageCounter,
    nodes: Iterable[Node],
) -> None:
    """Store the counts of ``nodes`` whose content is final and whose count is not stored yet."""
    if not (isinstance(counter, TokenCounter) and isinstance(store, TokenCountStore)):
        return
    final = {
        n.id: n
        for n in nodes
        if not counter.trusts(n.id) and (n.role in ("user", "system") or n.status == "complete")
    }
    if not final:
        return
    values = counter.count_many([(n.id, n.items) for n in final.values()])
    counts = dict(zip(final, values, strict=True))
    await store.put_token_counts(conversation_id, counter.encoding_name, counts)
    counter.trust(counts)
