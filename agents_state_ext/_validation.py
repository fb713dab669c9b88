"""``validate_run_settings``: reject every mixed configuration of state owners before a request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents import Agent, RunConfig, RunState
from agents.models.interface import Model
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel

from . import _compat
from ._binding import walk_agents
from ._items import keys
from ._model import TrackedModel
from .errors import MixedStateOwnerError

if TYPE_CHECKING:
    from ._owned import Owned

__all__ = ["validate_run_settings"]


def _mixed(first: str, second: str, fix: str) -> MixedStateOwnerError:
    return MixedStateOwnerError(
        f"two owners of one conversation's state: {first} and {second}. {fix}"
    )


def validate_run_settings(
    state: Owned | None = None,
    *,
    agent: Agent[Any] | None = None,
    input: Any = None,
    run_config: RunConfig | None = None,
    previous_response_id: str | None = None,
    conversation_id: str | None = None,
    auto_previous_response_id: bool = False,
    session: Any = None,
) -> None:
    """Raise :class:`~agents_state_ext.MixedStateOwnerError` for a mixed configuration.

    The keyword arguments are what the caller would give ``Runner.run`` directly; ``state`` is
    the conversation's chosen owner, if any. Checked, in order: a session together with any
    server id; ``conversation_id`` together with ``previous_response_id``; ids or a session
    given although ``state`` owns the conversation; a RunState whose ids disagree with the
    given ones (or with the state's ledger); replayed input that holds items the server already
    acknowledged; a model that cannot honour server-managed state (Chat Completions); output
    guardrails anywhere in the agent graph under server ownership (a rejected response would
    stay in the server's history); and ``store=False`` under either server strategy.
    Nothing is sent by this function.
    """
    server_ids = [
        name
        for name, value in (
            ("previous_response_id", previous_response_id),
            ("conversation_id", conversation_id),
            ("auto_previous_response_id", auto_previous_response_id),
        )
        if value
    ]
    if session is not None and server_ids:
        raise _mixed(
            "an SDK session",
            f"server-managed state ({', '.join(server_ids)})",
            "Use the session alone, or drop the session and let the server own the history.",
        )
    if conversation_id and (previous_response_id or auto_previous_response_id):
        raise _mixed(
            f"the Conversations API (conversation_id={conversation_id!r})",
            "the Responses API chain (previous_response_id)",
            "Pick one: a conversation already chains its responses.",
        )
    if isinstance(input, RunState):
        _check_run_state_ids(input, previous_response_id, conversation_id)
    if state is None:
        return
    chosen = state.owner
    owner = chosen.label
    given = server_ids + (["session"] if session is not None else [])
    if given:
        raise _mixed(
            owner,
            f"what was passed to the run ({', '.join(given)})",
            "Pass no ids or session: ConversationState supplies them for its strategy.",
        )
    lifecycle = chosen.lifecycle
    if lifecycle is None:
        return
    tracker = lifecycle.tracker
    if isinstance(input, list):
        replayed = [item for item in input if _acknowledged(tracker, item)]
        if replayed:
            raise _mixed(
                owner,
                "replayed history in the input (e.g. result.to_input_list())",
                f"{len(replayed)} input item(s) are already on the server; send only the "
                "new turn, the server chains the rest.",
            )
    # One walk of the agent graph serves the three checks below.
    graph = list(walk_agents(agent)) if agent is not None else []
    for holder, model in _models(graph, run_config):
        inner = model.inner if isinstance(model, TrackedModel) else model
        if isinstance(inner, OpenAIChatCompletionsModel):
            where = "RunConfig.model" if holder is None else f"agent {holder.name!r}"
            raise _mixed(
                owner,
                f"a Chat Completions model ({where}) that keeps no server-side state",
                "Use a Responses API model, or ConversationState.replay() / .session().",
            )
    guarded = _output_guardrails(graph, run_config)
    if guarded:
        raise _mixed(
            owner,
            f"output guardrails on {guarded}, which may reject a response the server has "
            "already stored in the conversation",
            "Move the check into an input guardrail or a tool, or use a client-managed "
            "strategy (replay / session) where rejected output can be left out.",
        )
    # Both server owners need the server to keep what it answered: a chain needs the stored
    # response, a conversation its stored items.
    kept = chosen.kept
    for where, store in _store_settings(graph, run_config):
        if store is False:
            raise _mixed(
                owner,
                f"store=False in the model settings of {where}, so no {kept} is kept on the server",
                "Set store=True (the default) or use ConversationState.replay().",
            )


def _acknowledged(tracker: Any, item: Any) -> bool:
    # Only stable keys: object identity says nothing across runs.
    found = keys(item)
    if found.item_id is not None and tracker.has_item_id(found.item_id):
        return True
    return found.output_call_id is not None and tracker.has_call_output(found.output_call_id)


def _check_run_state_ids(
    run_state: RunState[Any], previous_response_id: str | None, conversation_id: str | None
) -> None:
    stored_previous, stored_conversation = _compat.run_state_ids(run_state)
    for name, given, stored in (
        ("previous_response_id", previous_response_id, stored_previous),
        ("conversation_id", conversation_id, stored_conversation),
    ):
        if given is not None and stored is not None and given != stored:
            raise _mixed(
                f"the resumed RunState ({name}={stored!r})",
                f"the explicitly given {name}={given!r}",
                "Resume with the RunState's own ids (pass none), or start a new run.",
            )


def _models(
    graph: list[Agent[Any]], run_config: RunConfig | None
) -> list[tuple[Agent[Any] | None, Any]]:
    """The ``Model`` instances of the run: ``(agent, model)``, ``None`` for ``RunConfig.model``."""
    found: list[tuple[Agent[Any] | None, Any]] = []
    if run_config is not None and isinstance(run_config.model, Model):
        found.append((None, run_config.model))
    for current in graph:
        if isinstance(current.model, Model):
            found.append((current, current.model))
    return found


def _output_guardrails(graph: list[Agent[Any]], run_config: RunConfig | None) -> str | None:
    if run_config is not None and run_config.output_guardrails:
        return "RunConfig"
    for current in graph:
        if current.output_guardrails:
            return f"agent {current.name!r}"
    return None


def _store_settings(
    graph: list[Agent[Any]], run_config: RunConfig | None
) -> list[tuple[str, bool | None]]:
    found: list[tuple[str, bool | None]] = []
    if run_config is not None and run_config.model_settings is not None:
        found.append(("RunConfig", run_config.model_settings.store))
    for current in graph:
        if current.model_settings.store is False:
            found.append((f"agent {current.name!r}", False))
    return found
