"""The only place agents-state-ext touches private names of the Agents SDK.

Every private name used here is listed in :data:`PRIVATE_NAMES`, and ``tests/test_compat.py``
checks each one, and what it means, on every supported SDK minor (``.ci/run`` runs those tests
against each of them). A name that is missing or no longer has the shape we rely on raises
:class:`SDKContractError`, which names the installed SDK version and the name, at first use:
nothing here falls back to a guess. What is left are the SDK's own answers for objects it does
not know: a model that is not one of the SDK's OpenAI models talks through no known client, and
a ``Handoff`` built without ``agents.handoff()`` names no target agent.

The same names and meanings hold on every minor in :data:`SUPPORTED_SDK` (0.21 to 0.24).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

from agents import Agent, Handoff, OpenAIResponsesModel, RunState, _public_agent
from agents import __version__ as _sdk_version
from agents.models import _retry_runtime, _run_context
from agents.models.interface import Model
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.result import RunResult, RunResultBase, RunResultStreaming
from agents.run_internal import items as _run_items
from agents.run_internal import oai_conversation as _oai_conversation
from agents.run_internal import prompt_cache_key as _prompt_cache_key
from openai import AsyncOpenAI

from .errors import SDKContractError

__all__ = [
    "PRIVATE_NAMES",
    "SDK_VERSION",
    "SUPPORTED_SDK",
    "ModelHooks",
    "SDKContractError",
    "cleanup_on_run_end",
    "contract_problems",
    "current_run_owner",
    "handoff_target",
    "inner_openai_client",
    "pending_approvals",
    "provider_retries_disabled",
    "public_agent",
    "repair_turn_count",
    "run_state_agent",
    "run_state_agents",
    "run_state_ids",
    "run_state_is_chained",
    "sdk_deduplicate_input_items",
    "sdk_server_conversation_tracker",
    "set_run_state_agents",
    "show_item_agents",
    "show_public_agents",
    "stored_stream_exception",
    "supports_default_prompt_cache_key",
    "tag_public_agent",
]

SDK_VERSION: str = _sdk_version
"""The installed ``openai-agents`` version."""

SUPPORTED_SDK = ">=0.21,<0.25"
"""The ``openai-agents`` versions the contract tests pass on (the same range as pyproject's)."""

_OPENAI_MODELS = (OpenAIResponsesModel, OpenAIChatCompletionsModel)


def _broken(name: str, problem: str) -> SDKContractError:
    """The typed error for a private SDK name that is missing or changed shape."""
    return SDKContractError(
        f"openai-agents {SDK_VERSION}: {name} {problem}; agents-state-ext relies on it "
        f"and supports openai-agents{SUPPORTED_SDK} (see agents_state_ext/_compat.py)",
        name=name,
    )


# Where each private name lives: (its owner, the name). A class's dataclass fields count too.
PRIVATE_NAMES: tuple[tuple[ModuleType | type, str], ...] = (
    (_run_context, "get_model_run_owner"),
    (_retry_runtime, "provider_managed_retries_disabled"),
    (_prompt_cache_key, "_model_supports_default_prompt_cache_key"),
    (Model, "_cleanup_on_run_end"),  # called by the run loop; ModelHooks routes it
    (OpenAIResponsesModel, "_supports_default_prompt_cache_key"),  # read by the resolver above
    (OpenAIResponsesModel, "_get_client"),
    (OpenAIChatCompletionsModel, "_get_client"),
    (RunResultStreaming, "_stored_exception"),
    (RunState, "_previous_response_id"),
    (RunState, "_conversation_id"),
    (RunState, "_auto_previous_response_id"),
    (RunState, "_model_responses"),
    (RunState, "_current_turn"),
    (RunState, "_current_agent"),  # the agent Runner resumes a RunState with
    (RunState, "_current_step"),  # a paused run's step: its pending approvals
    (RunState, "_starting_agent"),  # the root of the graph a RunState resolves agents in
    (RunResult, "_last_agent"),
    (RunResultBase, "_starting_agent_for_state"),  # the root ``to_state()`` gives a RunState
    (RunResultStreaming, "_state"),  # a streamed run's own RunState: ``to_state()`` reads its root
    # The identity the SDK shows for an execution copy (approval keys, tool callbacks).
    (_public_agent, "set_public_agent"),
    (_public_agent, "get_public_agent"),
    (Handoff, "_agent_ref"),
    # Only bench/ uses these two: the SDK's own ledger, the anchor the benchmarks compare with.
    (_oai_conversation, "OpenAIServerConversationTracker"),
    (_run_items, "deduplicate_input_items_preferring_latest"),
)


def _label(owner: ModuleType | type, name: str) -> str:
    return f"{owner.__name__}.{name}"


def _has(owner: ModuleType | type, name: str) -> bool:
    fields = getattr(owner, "__dataclass_fields__", None)
    return hasattr(owner, name) or (isinstance(fields, dict) and name in fields)


def contract_problems() -> list[str]:
    """What the installed SDK lacks of :data:`PRIVATE_NAMES` (empty when all are there)."""
    return [
        str(_broken(_label(owner, name), "is missing"))
        for owner, name in PRIVATE_NAMES
        if not _has(owner, name)
    ]


def _read(obj: object, owner: ModuleType | type, name: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        raise _broken(_label(owner, name), "is missing") from None


def _typed(value: Any, kind: type | tuple[type, ...], owner: type, name: str) -> Any:
    if not isinstance(value, kind):
        problem = f"holds a {type(value).__name__} where agents-state-ext expects {kind}"
        raise _broken(_label(owner, name), problem)
    return value


def _function(owner: ModuleType, name: str) -> Callable[..., Any]:
    found = _read(owner, owner, name)
    if not callable(found):
        raise _broken(_label(owner, name), "is not callable")
    return found  # type: ignore[no-any-return]


def current_run_owner() -> object | None:
    """The object that identifies the SDK run making the current model call (None outside one)."""
    owner: object | None = _function(_run_context, "get_model_run_owner")()
    return owner


def provider_retries_disabled() -> AbstractContextManager[Any]:
    """Turn off the openai client's own hidden retries for a stateful request.

    The SDK's own context manager, handed out as it is (no wrapper per request).
    """
    manager = _function(_retry_runtime, "provider_managed_retries_disabled")(True)
    if not isinstance(manager, AbstractContextManager):
        name = _label(_retry_runtime, "provider_managed_retries_disabled")
        raise _broken(name, f"returned a {type(manager).__name__}, not a context manager")
    return manager


def supports_default_prompt_cache_key(model: object) -> bool:
    """Whether the SDK would give ``model`` its default ``prompt_cache_key``.

    Asked of the SDK's own resolver, so a model the SDK does not know gets the SDK's answer.
    """
    probe = _function(_prompt_cache_key, "_model_supports_default_prompt_cache_key")
    answer = probe(model)
    if not isinstance(answer, bool):
        name = _label(_prompt_cache_key, "_model_supports_default_prompt_cache_key")
        raise _broken(name, f"returned a {type(answer).__name__}, not a bool")
    return answer


def inner_openai_client(model: object) -> AsyncOpenAI | None:
    """The ``AsyncOpenAI`` client one of the SDK's OpenAI models talks through.

    None for any other model (a model name, a custom ``Model``): no client is known for it.
    """
    if not isinstance(model, _OPENAI_MODELS):
        return None
    owner = type(model)
    getter = _read(model, owner, "_get_client")
    client = _typed(getter(), AsyncOpenAI, owner, "_get_client()")
    return client  # type: ignore[no-any-return]


def stored_stream_exception(result: RunResultStreaming) -> BaseException | None:
    """The exception a streamed run ended with, which the SDK keeps until ``stream_events()``."""
    error = _read(result, RunResultStreaming, "_stored_exception")
    if error is None:
        return None
    return _typed(error, BaseException, RunResultStreaming, "_stored_exception")  # type: ignore[no-any-return]


def run_state_ids(run_state: RunState[Any]) -> tuple[str | None, str | None]:
    """The ``(previous_response_id, conversation_id)`` a RunState would resume with."""
    ids = []
    for name in ("_previous_response_id", "_conversation_id"):
        value = _read(run_state, RunState, name)
        ids.append(None if value is None else _typed(value, str, RunState, name))
    return ids[0], ids[1]


def repair_turn_count(run_state: RunState[Any]) -> None:
    """Lower the SDK's turn count to the model responses the run really got.

    After a cancel the SDK has counted a turn whose model call never returned.
    """
    responses = _typed(
        _read(run_state, RunState, "_model_responses"), list, RunState, "_model_responses"
    )
    turn = _typed(_read(run_state, RunState, "_current_turn"), int, RunState, "_current_turn")
    if turn > len(responses):
        run_state._current_turn = len(responses)


def run_state_agent(run_state: RunState[Any]) -> Any:
    """The agent ``Runner`` resumes ``run_state`` with (None before its run began).

    ``Runner`` resumes a RunState with the agent the RunState holds, not the one it is given:
    the agent its run ended with, or the one ``from_json`` found by name.
    """
    current = _read(run_state, RunState, "_current_agent")
    if current is not None and not isinstance(getattr(current, "name", None), str):
        raise _broken(_label(RunState, "_current_agent"), "holds no agent")
    return current


def run_state_agents(run_state: RunState[Any]) -> tuple[Any, Any]:
    """The agent ``run_state`` resumes with and the root of its graph (None when unset)."""
    starting = _read(run_state, RunState, "_starting_agent")
    if starting is not None and not isinstance(starting, Agent):
        raise _broken(_label(RunState, "_starting_agent"), "holds no agent")
    return run_state_agent(run_state), starting


def set_run_state_agents(run_state: RunState[Any], current: Any, starting: Any) -> None:
    """Make ``run_state`` resume with ``current``, resolving agents from ``starting``."""
    run_state_agents(run_state)  # checks both names are there and hold agents
    run_state._current_agent = current
    run_state._starting_agent = starting


def pending_approvals(run_state: RunState[Any]) -> list[Any]:
    """The approval items ``run_state`` waits on, the live ones (``get_interruptions()`` copies).

    A resumed run matches each to the agent it resumes with by identity.
    """
    step = _read(run_state, RunState, "_current_step")
    items = getattr(step, "interruptions", None) if step is not None else None
    if items is None:
        return []
    return list(_typed(items, list, RunState, "_current_step"))


def tag_public_agent(copy: Agent[Any], original: Agent[Any]) -> None:
    """Make the SDK show ``original`` where it shows the agent of a run of ``copy``.

    The SDK tags its own execution copies this way; from 0.24 approvals are keyed by the
    tagged agent, so a decision made on a run of one copy holds for a run of another.
    """
    _function(_public_agent, "set_public_agent")(copy, original)
    if public_agent(copy) is not original:
        raise _broken(_label(_public_agent, "set_public_agent"), "does not tag the copy")


def public_agent(agent: Any) -> Any:
    """The app's agent that ``agent`` (a copy tagged by :func:`tag_public_agent`) stands for."""
    if not isinstance(agent, Agent):
        return agent
    return _function(_public_agent, "get_public_agent")(agent)


def show_public_agents(result: RunResult | RunResultStreaming) -> None:
    """Make ``result`` show the app's agents, not the copies the run went through.

    ``last_agent`` and the root ``to_state()`` gives its RunState (a streamed run's own
    RunState included) become the agents the copies stand for; a RunState the app passed in
    is left to the caller (see :func:`set_run_state_agents`).
    """
    for item in [*result.new_items, *result.interruptions]:
        show_item_agents(item, public_agent)
    if isinstance(result, RunResultStreaming):
        result.current_agent = public_agent(result.current_agent)
        state = _read(result, RunResultStreaming, "_state")
        if state is not None:
            current, starting = run_state_agents(
                _typed(state, RunState, RunResultStreaming, "_state")
            )
            set_run_state_agents(state, public_agent(current), public_agent(starting))
    else:
        last = _read(result, RunResult, "_last_agent")
        if last is not None:
            result._last_agent = public_agent(last)
    starting = _read(result, RunResultBase, "_starting_agent_for_state")
    if starting is not None:
        result._starting_agent_for_state = public_agent(starting)


def show_item_agents(item: Any, mapping: Callable[[Any], Any]) -> None:
    """Replace the agents a run item names (public fields) by what ``mapping`` gives."""
    for name in ("agent", "source_agent", "target_agent"):
        found = getattr(item, name, None)
        if isinstance(found, Agent):
            setattr(item, name, mapping(found))


def handoff_target(handoff: Handoff[Any, Any]) -> object | None:
    """The agent a ``Handoff`` built by ``agents.handoff()`` leads to.

    The public ``Handoff`` only names its target; ``handoff()`` keeps a weak reference to it. A
    ``Handoff`` constructed directly has none (None), as has one whose agent is gone.
    """
    ref = _read(handoff, Handoff, "_agent_ref")
    if ref is None:
        return None
    if not callable(ref):
        raise _broken(_label(Handoff, "_agent_ref"), "is not a weak reference")
    target: object | None = ref()
    return target


def run_state_is_chained(run_state: RunState[Any]) -> bool:
    """Whether the RunState was made in the SDK's chaining mode (``auto_previous_response_id``),
    so its ``previous_response_id`` is where the SDK's own view of the chain stands."""
    value = _read(run_state, RunState, "_auto_previous_response_id")
    return _typed(value, bool, RunState, "_auto_previous_response_id")  # type: ignore[no-any-return]


class ModelHooks:
    """Base for the library's wrapping models: the two hooks the SDK calls by private name.

    The run loop calls ``_cleanup_on_run_end(owner)`` on the model when a run ends, and the SDK's
    prompt-cache-key resolver reads ``_supports_default_prompt_cache_key()``. A subclass
    implements the public-named :meth:`release_run` and :meth:`sends_default_prompt_cache_key`
    instead, and gets the private names as aliases of its own two methods when the class is
    made, so the private names stay in this module and the SDK calls the subclass directly.
    List it before ``Model`` in the bases.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        setattr(cls, "_cleanup_on_run_end", cls.release_run)  # noqa: B010 (a private name)
        setattr(cls, "_supports_default_prompt_cache_key", cls.sends_default_prompt_cache_key)  # noqa: B010

    async def release_run(self, owner: object) -> None:
        """The SDK run ``owner`` ended: release what the model held for it."""
        raise NotImplementedError

    def sends_default_prompt_cache_key(self) -> bool:
        """Whether the SDK should give this model its default ``prompt_cache_key``."""
        raise NotImplementedError


async def cleanup_on_run_end(model: Model, owner: object) -> None:
    """Tell ``model`` (a wrapped one) that the SDK run ``owner`` ended, as the run loop would."""
    hook = _read(model, Model, "_cleanup_on_run_end")
    if not callable(hook):
        raise _broken(_label(Model, "_cleanup_on_run_end"), "is not callable")
    await hook(owner)


def sdk_server_conversation_tracker() -> type:
    """The SDK's own server-conversation ledger class (the benchmarks' anchor)."""
    name = "OpenAIServerConversationTracker"
    found = _read(_oai_conversation, _oai_conversation, name)
    if not isinstance(found, type):
        raise _broken(_label(_oai_conversation, name), "is not a class")
    return found


def sdk_deduplicate_input_items() -> Callable[..., Any]:
    """The SDK's de-duplication of a turn's input (the run loop applies it before sending)."""
    return _function(_run_items, "deduplicate_input_items_preferring_latest")
