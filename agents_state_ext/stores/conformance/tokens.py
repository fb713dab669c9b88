"""Checks of the token-count capability (:class:`~agents_state_ext.stores.TokenCountStore`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ...errors import ConversationNotFoundError, StoreError
from ..base import TokenCountStore
from ._support import BAD_IDS, FullStore, StoreFactory, capable, expect, raises


async def check_token_counts(factory: StoreFactory) -> None:
    """Token counts round-trip per conversation and encoding, are replaced, and filtered."""
    async with capable(factory, TokenCountStore, "token-count") as store:
        await store.create_conversation("c1", strategy="replay")
        await store.create_conversation("c2", strategy="replay")
        expect(await store.get_token_counts("c1", "o200k_base") == {}, "new counts exist")
        await store.put_token_counts("c1", "o200k_base", {"m1": 5, "m2": 0, "m3": 12})
        await store.put_token_counts("c1", "cl100k_base", {"m1": 6})
        got = await store.get_token_counts("c1", "o200k_base")
        expect(got == {"m1": 5, "m2": 0, "m3": 12}, f"counts changed in the store: {got}")
        await store.put_token_counts("c1", "o200k_base", {"m1": 7, "m4": 1})
        got = await store.get_token_counts("c1", "o200k_base")
        expect(got == {"m1": 7, "m2": 0, "m3": 12, "m4": 1}, f"counts not merged: {got}")
        some = await store.get_token_counts("c1", "o200k_base", ["m3", "missing", "m1"])
        expect(some == {"m3": 12, "m1": 7}, f"filtered counts: {some}")
        none = await store.get_token_counts("c1", "o200k_base", [])
        expect(none == {}, f"an empty filter gave {none}")
        other = await store.get_token_counts("c1", "cl100k_base")
        expect(other == {"m1": 6}, f"encodings are not kept apart: {other}")
        expect(await store.get_token_counts("c2", "o200k_base") == {}, "counts leaked to c2")
        bad_counts: tuple[Any, ...] = ({"m9": -1}, {"m9": True}, {"m9": 1.5}, {"m9": "3"})
        for counts in bad_counts:
            await raises(
                StoreError,
                f"counts {counts!r}",
                store.put_token_counts("c1", "o200k_base", counts),
            )
        expect("m9" not in await store.get_token_counts("c1", "o200k_base"), "a bad count kept")
        await raises(
            ConversationNotFoundError,
            "put_token_counts on an unknown conversation",
            store.put_token_counts("nope", "o200k_base", {"m1": 1}),
        )
        await raises(
            ConversationNotFoundError,
            "get_token_counts on an unknown conversation",
            store.get_token_counts("nope", "o200k_base"),
        )
        await store.delete_conversation("c1")
        await store.create_conversation("c1", strategy="replay")
        after = await store.get_token_counts("c1", "o200k_base")
        expect(after == {}, f"delete_conversation kept token counts: {after}")


async def check_token_typed_ids(factory: StoreFactory) -> None:
    """Token-count ids (conversation, encoding, node) that are not storable text: StoreError."""
    async with capable(factory, TokenCountStore, "token-count") as store:
        await store.create_conversation("c1", strategy="replay")
        for bad in BAD_IDS:
            for name, call in _token_calls(bad).items():
                await raises(
                    StoreError,
                    f"{name} with {bad!r}",
                    call(store),
                    not_=(ConversationNotFoundError,),
                )
        expect(await store.get_token_counts("c1", "enc") == {}, "a bad id wrote a count")


def _token_calls(bad: Any) -> dict[str, Callable[[FullStore], Awaitable[object]]]:
    calls: dict[str, Callable[[FullStore], Awaitable[object]]] = {
        "put_token_counts(conversation)": lambda s: s.put_token_counts(bad, "enc", {"n1": 1}),
        "put_token_counts(encoding)": lambda s: s.put_token_counts("c1", bad, {"n1": 1}),
        "get_token_counts(conversation)": lambda s: s.get_token_counts(bad, "enc"),
        "get_token_counts(encoding)": lambda s: s.get_token_counts("c1", bad),
        "get_token_counts(node ids)": lambda s: s.get_token_counts("c1", "enc", [bad]),
    }
    if isinstance(bad, str):  # a list cannot be a dict key
        calls["put_token_counts(node id)"] = lambda s: s.put_token_counts(
            "c1", "enc", {"n1": 1, bad: 2}
        )
    return calls
