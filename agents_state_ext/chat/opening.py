"""``open_conversation``: create a chat in a store, or open a stored one, under a strategy."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, get_args

from agents import Agent

from ..errors import ConversationNotFoundError, MixedStateOwnerError
from ..graph import default_id_factory
from ..state import StrategyName
from ..stores import ConversationStore
from ..tokens import MessageCounter
from .conversation import Conversation, check_budget, load_graph
from .forks import ServerConversations

__all__ = ["STRATEGIES", "open_conversation"]

STRATEGIES: tuple[str, ...] = get_args(StrategyName)


def open_conversation(
    store: ConversationStore,
    conversation_id: str | None = None,
    *,
    strategy: StrategyName | None = None,
    agent: Agent[Any] | None = None,
    budget: int | None = None,
    counter: MessageCounter | None = None,
    system: str | None = None,
    client: Any | None = None,
    server_conversation_id: str | None = None,
    prompt_version: str | None = None,
    fork: bool = True,
    create: bool = True,
    runner_kwargs: Mapping[str, Any] | None = None,
    id_factory: Callable[[str], str] | None = None,
) -> Conversation:
    """Open chat ``conversation_id`` from ``store``, creating it (new id if ``None``) if absent.

    A new chat needs ``strategy`` (``"replay"``, ``"session"``, ``"previous_response"`` or
    ``"conversation"``) and may start with ``system`` instructions; a stored one keeps the
    strategy it was created with (a different one raises ``MixedStateOwnerError``) and its
    stored budget and prompt version unless ``budget`` / ``prompt_version`` is given (a given
    one is stored for later openings). ``agent`` answers (required to send). ``counter``
    defaults to an exact :class:`~agents_state_ext.TokenCounter` for the agent's model.

    Conversation strategy: ``server_conversation_id`` continues an existing server
    conversation (default: one is created on the first attempt); ``client`` (an
    ``AsyncOpenAI``, default the agent model's own) creates and checks them; ``fork=False``
    makes a branch that would need a new server conversation fail with
    ``ConversationForkError`` before anything is sent. ``create=False`` raises
    ``ConversationNotFoundError`` for an unknown id. ``runner_kwargs`` go to every run
    (``max_turns``, ``context``, ``run_config``, ...). ``id_factory`` makes new node ids, as
    in :class:`~agents_state_ext.ConversationGraph` (pin them in tests).
    """
    if strategy is not None and strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    budget = check_budget(budget)
    stored = conversation_id is not None and conversation_id in store.list_conversations()
    if conversation_id is not None and not stored and not create:
        raise ConversationNotFoundError(f"no conversation {conversation_id!r} in this store")
    if stored:
        assert conversation_id is not None
        info = store.get_conversation(conversation_id)
        if strategy is not None and strategy != info.strategy:
            raise MixedStateOwnerError(
                f"conversation {conversation_id} was created with the {info.strategy} strategy; "
                f"opening it as {strategy} would give its history a second owner"
            )
        meta = dict(info.meta)
        if budget is None:
            budget = check_budget(meta.get("budget"))
        if prompt_version is None:
            stored_version = meta.get("prompt_version")
            prompt_version = stored_version if isinstance(stored_version, str) else None
        chosen: StrategyName = info.strategy  # type: ignore[assignment]  # checked on create
    else:
        if strategy is None:
            raise ValueError("a new conversation needs a strategy= (replay, session, ...)")
        chosen = strategy
        conversation_id = conversation_id or default_id_factory("chat")
        servers = ServerConversations()
        if server_conversation_id is not None:
            servers.root = server_conversation_id
            servers.add(server_conversation_id, tip=None, last_item_id=None, system=False)
        meta = {
            "budget": budget,
            "prompt_version": prompt_version,
            "server_conversations": servers.to_dict(),
        }
        store.create_conversation(conversation_id, strategy=chosen, meta=meta)
    graph = load_graph(store, conversation_id, id_factory)
    chat = Conversation(
        store,
        graph,
        strategy=chosen,
        agent=agent,
        budget=budget,
        counter=counter,
        client=client,
        prompt_version=prompt_version,
        fork=fork,
        runner_kwargs=runner_kwargs,
        meta=meta,
        id_factory=id_factory,
    )
    if stored and prompt_version != meta.get("prompt_version"):
        chat.prompt_version = prompt_version  # a new version from now on, kept with the chat
    if not stored and system is not None:
        graph.add_system(system)
        chat._commit()
    return chat
