"""The previous_response owner: the Responses API chains the history by response id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import RunInProgressError
from ..types import StrategyName
from .server import ServerOwner

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from .._compaction import CompactionResult
    from ..types import CompactionMode

__all__ = ["PreviousResponseOwner"]


class PreviousResponseOwner(ServerOwner):
    """Runs chain from the ledger's ``previous_response_id`` (then follow themselves)."""

    name: ClassVar[StrategyName] = "previous_response"
    label = "the Responses API (previous_response_id)"
    kept = "response to chain from"

    def cursor_kwargs(self) -> dict[str, Any]:
        return {
            "previous_response_id": self.lifecycle.tracker.previous_response_id,
            "auto_previous_response_id": True,
        }

    def reseed(self, items: list[Any]) -> None:
        if self.lifecycle.active:
            raise RunInProgressError("reseed() while a run is in flight")
        self.lifecycle.tracker.restart(list(items))

    async def compact(
        self,
        *,
        client: AsyncOpenAI,
        model: str,
        items: list[Any] | None,
        mode: CompactionMode,
        store: bool,
    ) -> CompactionResult:
        from .._compaction import compact_chain

        return await compact_chain(self.lifecycle, client, model, items, mode, store)
