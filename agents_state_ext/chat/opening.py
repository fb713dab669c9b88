"""``open_conversation``: create a chat in a store, or open a stored one, under a strategy."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, get_args

from agents import Agent
from openai import AsyncOpenAI

from .._graph import default_id_factory
from .._run_config import as_run_config
from .._state import StrategyName
from .._tokens import MessageCounter
from ..errors import ConversationNotFoundError, MixedStateOwnerError, StoredDataError
from ..stores import ConversationStore
from ..stores._token_counts import load_counts
from .commits import commit_new, load_graph
from .conversation import Conversation
from .forks import ServerConversations
from .peers import store_left
from .rules import check_budget, check_prompt_version

__all__ = ["STRATEGIES", "open_conversation"]

STRATEGIES: tuple[str, ...] = get_args(StrategyName)


async def open_conversation(
    store: ConversationStore,
    conversation_id: str | None = None,
    *,
    strategy: StrategyName | None = None,
    agent: Agent[Any] | None = None,
    budget: int | None = None,
    counter: MessageCounter | None = None,
    system: str | None = None,
    client: AsyncOpenAI | None = None,
    server_conversation_id: str | None = None,
    prompt_version: str | None = None,
    fork: bool = True,
    create: bool = True,
    runner_kwargs: Mapping[str, Any] | None = None,
    id_factory: Callable[[str], str] | None = None,
) -> Conversation:
    """Open chat ``conversation_id`` from ``store``, creating it (new id if ``None``) if absent.

    A coroutine: ``chat = await open_conversation(store, ...)``. A new chat needs ``strategy``
    (``"replay"``, ``"session"``, ``"previous_response"`` or ``"conversation"``) and may start
    with ``system`` instructions; a stored one keeps the strategy it was created with (a
    different one raises ``MixedStateOwnerError``) and its stored budget and prompt version
    unless ``budget`` / ``prompt_version`` is given (a given one is stored for later
    openings). ``agent`` answers (required to send). ``counter`` defaults to a
    :class:`~agents_state_ext.TokenCounter` for the agent's model: exact for an OpenAI model,
    an estimate marked ``exact=False`` on selections and records for one tiktoken does not
    know (pass your own counter for that model's tokenizer).

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
    prompt_version = check_prompt_version(prompt_version)
    if runner_kwargs is not None and "run_config" in runner_kwargs:  # checked before any read
        runner_kwargs = {**runner_kwargs, "run_config": as_run_config(runner_kwargs["run_config"])}
    info = None
    if conversation_id is not None:
        try:
            info = await store.get_conversation(conversation_id)
        except ConversationNotFoundError:
            if not create:
                raise ConversationNotFoundError(
                    f"no conversation {conversation_id!r} in this store"
                ) from None
    if info is not None:
        if info.strategy not in STRATEGIES:
            raise StoredDataError(
                f"conversation {info.id!r}: stored strategy {info.strategy[:40]!r} is unknown"
            )
        if strategy is not None and strategy != info.strategy:
            raise MixedStateOwnerError(
                f"conversation {info.id} was created with the {info.strategy} strategy; "
                f"opening it as {strategy} would give its history a second owner"
            )
        conversation_id, meta = info.id, dict(info.meta)
        given = {"budget": budget, "prompt_version": prompt_version}
        changed = {k: v for k, v in given.items() if v is not None and v != meta.get(k)}
        if changed:  # given ones are kept with the chat for later openings
            await store.update_conversation_meta(conversation_id, changed)
            meta.update(changed)
        try:
            budget = check_budget(meta.get("budget"))
        except ValueError as exc:
            raise StoredDataError(
                f"conversation {conversation_id!r}: stored budget: {exc}"
            ) from None
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
        await store.create_conversation(conversation_id, strategy=chosen, meta=meta)
    if info is not None:
        await store_left(store, conversation_id)  # what a failed commit of another handle left
    graph = await load_graph(store, conversation_id, id_factory)
    if info is None and system is not None:
        graph.add_system(system)
        await commit_new(store, conversation_id, graph)
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
    await load_counts(store, conversation_id, chat.counter)
    return chat
