"""The 400s the real API gives for a malformed request body, before it touches any state.

Applied to ``POST /responses``, ``POST /responses/compact``, ``POST /conversations`` and
``POST /conversations/{id}/items`` (see ``MockResponsesAPI(validate_requests=...)``). The allowed
names come from the installed ``openai`` package, so the mock accepts exactly what its types can
express: the top-level parameters of ``ResponseCreateParams`` (plus ``stream``), of
``ResponseCompactParams`` (its ``input`` is the same ``ResponseInputItemParam`` list and
``model`` is required [doc: openai-openapi ``CompactResponseMethodPublicBody``]; that compact
answers the same 400s as create is [inf]), of ``ConversationCreateParams`` and
``ItemCreateParams`` (``include`` there is a query parameter), and per input item ``type`` the
keys of the ``ResponseInputItemParam`` members of that type (a ``message`` takes the keys of
``EasyInputMessageParam``, ``Message`` and ``ResponseOutputMessageParam`` together), as the
library's ``_input_rules`` reads them (the chat layer refuses the same content up front).

Sources, per rule:

- unknown parameter, top level or on an item: [obs] ``400 {"message": "Unknown parameter:
  'input[3].tool_calls'.", "param": "input[3].tool_calls", "code": "unknown_parameter"}``
  (openai/openai-python#2677; 1jehuang/jcode#1028 for ``input[3].status``). The same answer
  for a top-level name and for ``items[N].<key>`` on the conversations endpoints is [inf].
  [obs] The live API has also rejected ``status`` on replayed reasoning items
  (jcode#1028, openai-python PR #3053) although the openai types allow it; the mock follows
  the types, so that it never rejects what the SDK builds from them.
- a role outside the four: [obs] ``"Invalid value: 'tool'. Supported values are: 'assistant',
  'system', 'developer', and 'user'."``, param ``input[3]``, code ``invalid_value``
  (openai-python#2677; NousResearch/hermes-agent#5709 quotes the same text).
- an unknown item ``type``: [inf] the same ``invalid_value`` shape, listing the supported types,
  param ``input[N].type``; no public record of the live text was found.
- an id without its type's prefix: [obs] ``"Invalid 'input[274].id': 'item_c270...'. Expected an
  ID that begins with 'fc'."``, code ``invalid_id_prefix`` (BigPizzaV3/CodexPlusPlus#1796,
  openai/codex#33176 for ``'msg'``, jlcodes99/cockpit-tools#2090 for ``'rs'``; the code is read
  from the clients' log lines, which print ``[param] [code] message``). Prefixes: ``msg``,
  ``fc`` and ``rs`` [obs]; ``ctc`` for ``custom_tool_call`` [obs, CodexPlusPlus#1796];
  ``fco`` for ``function_call_output`` and ``cmp`` for ``compaction`` [inf: ids the live API
  was seen to hand out, router-for-me/CLIProxyAPI#5692 and the compact docs example, not a
  recorded rejection]. Other types are not checked.
- ``arguments`` of a ``function_call`` that is not a string: [inf] ``"Invalid type for
  'input[N].arguments': expected a string, but got an object instead."``, code
  ``invalid_type``, modelled on the recorded ``"Invalid type for 'max_tokens': expected an
  integer, but got a decimal number instead."`` (Jeffser/Alpaca#904).
- no ``model``: [obs] ``"Missing required parameter: 'model'."``, param ``model``, code
  ``missing_required_parameter`` (mattermost/mattermost-plugin-agents#476, quoted in
  Menci/Floway#313).
- context over the model's window: [obs] ``"Your input exceeds the context window of this
  model. Please adjust your input and try again."``, param ``input``, code
  ``context_length_exceeded`` (the-open-agent/openagent#2344, dyad-sh/dyad#1672). [obs] A
  streamed request gets it as an ``error`` event inside a 200 stream (dyad#1672); the mock
  answers 400 either way [inf]. The context is the stored history (``previous_response_id``
  or ``conversation``) plus the input, counted as the mock's ``usage.input_tokens`` counts it
  (one word, one token; instructions not counted). Windows, by model family: ``gpt-4.1``
  1,047,576 [doc: the model pages, as the Vercel AI gateway lists them]; ``gpt-5``,
  ``gpt-5-mini``/``-nano``, ``gpt-5.1``, ``gpt-5.2`` 272,000 of input (400,000 of context less
  128,000 of output [doc: model pages]; the input share is [inf]); ``gpt-5.4`` and later
  1,050,000 [obs: model listings]; ``o1``, ``o3``, ``o4-mini`` 200,000; ``gpt-4o`` 128,000
  [doc]. Other models are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openai.types.conversations.conversation_create_params import ConversationCreateParams
from openai.types.conversations.item_create_params import ItemCreateParams
from openai.types.responses.response_compact_params import ResponseCompactParams
from openai.types.responses.response_create_params import ResponseCreateParamsBase

from .._input_rules import ID_PREFIXES, ITEM_KEYS, ROLES
from ._items import ApiError, normalize_input
from ._sse import default_usage

__all__ = [
    "ROLES",
    "check_add_items",
    "check_compact",
    "check_create_conversation",
    "check_create_response",
    "context_window",
]

CREATE_RESPONSE_PARAMS = frozenset(ResponseCreateParamsBase.__annotations__) | {"stream"}
COMPACT_PARAMS = frozenset(ResponseCompactParams.__annotations__)
CREATE_CONVERSATION_PARAMS = frozenset(ConversationCreateParams.__annotations__)
ADD_ITEMS_PARAMS = frozenset(ItemCreateParams.__annotations__) - {"include"}
# Longest prefix first; the first that the model name starts with wins.
_CONTEXT_WINDOWS: tuple[tuple[str, int | None], ...] = (
    ("gpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-5.1", 272_000),
    ("gpt-5.2", 272_000),
    ("gpt-5.", 1_050_000),
    ("gpt-5", 272_000),
    ("o1-mini", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
)


def context_window(model: str) -> int | None:
    """The input tokens ``model`` accepts, or None when the mock does not know its family."""
    name = model.lower().rsplit("/", 1)[-1]
    for prefix, window in _CONTEXT_WINDOWS:
        if name.startswith(prefix):
            return window
    return None


def _unknown(param: str) -> ApiError:
    return ApiError(400, f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter")


def _invalid_value(value: Any, supported: Sequence[str], param: str) -> ApiError:
    listed = ", ".join(f"'{s}'" for s in supported[:-1]) + f", and '{supported[-1]}'"
    return ApiError(
        400,
        f"Invalid value: '{value}'. Supported values are: {listed}.",
        param=param,
        code="invalid_value",
    )


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "null" if value is None else "a string"


def _check_params(body: Mapping[str, Any], known: frozenset[str]) -> None:
    for name in body:
        if name not in known:
            raise _unknown(name)


def _item_type(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if kind is None:
        if "role" in item:
            return "message"
        return "item_reference" if "id" in item else None
    return kind if isinstance(kind, str) else str(kind)


def _check_item(item: Any, param: str) -> None:
    if not isinstance(item, Mapping):
        return  # the endpoint's own "Invalid type" answer
    kind = _item_type(item)
    if kind is None:
        return
    allowed = ITEM_KEYS.get(kind)
    if allowed is None:
        raise _invalid_value(kind, sorted(ITEM_KEYS), f"{param}.type")
    if kind == "message" and item.get("role") not in ROLES:
        raise _invalid_value(item.get("role"), ROLES, param)
    for key in item:
        if key not in allowed:
            raise _unknown(f"{param}.{key}")
    item_id = item.get("id")
    prefix = ID_PREFIXES.get(kind)
    if prefix is not None and isinstance(item_id, str) and not item_id.startswith(prefix):
        raise ApiError(
            400,
            f"Invalid '{param}.id': '{item_id}'. Expected an ID that begins with '{prefix}'.",
            param=f"{param}.id",
            code="invalid_id_prefix",
        )
    if kind == "function_call" and "arguments" in item:
        arguments = item["arguments"]
        if not isinstance(arguments, str):
            raise ApiError(
                400,
                f"Invalid type for '{param}.arguments': expected a string, but got "
                f"{_json_type(arguments)} instead.",
                param=f"{param}.arguments",
                code="invalid_type",
            )


def _check_items(raw: Any, param: str) -> None:
    if isinstance(raw, list):
        for index, item in enumerate(raw):
            _check_item(item, f"{param}[{index}]")


def _check_model_request(
    body: Mapping[str, Any], known: frozenset[str], history: Sequence[Mapping[str, Any]]
) -> None:
    _check_params(body, known)
    model = body.get("model")
    if not model:
        raise ApiError(
            400,
            "Missing required parameter: 'model'.",
            param="model",
            code="missing_required_parameter",
        )
    _check_items(body.get("input"), "input")
    window = context_window(str(model))
    if window is None:
        return
    tokens = default_usage([*history, *normalize_input(body.get("input"))], ()).input_tokens
    if tokens > window:
        raise ApiError(
            400,
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again.",
            param="input",
            code="context_length_exceeded",
        )


def check_create_response(
    body: Mapping[str, Any], *, history: Sequence[Mapping[str, Any]] = ()
) -> None:
    """Reject a ``POST /responses`` body as the real API does; ``history`` is its stored context
    (empty when the server holds none), for the context-window check."""
    _check_model_request(body, CREATE_RESPONSE_PARAMS, history)


def check_compact(body: Mapping[str, Any], *, history: Sequence[Mapping[str, Any]] = ()) -> None:
    """Reject a ``POST /responses/compact`` body as the real API does: the rules of
    ``POST /responses`` over the parameters of ``ResponseCompactParams``."""
    _check_model_request(body, COMPACT_PARAMS, history)


def check_create_conversation(body: Mapping[str, Any]) -> None:
    """Reject a ``POST /conversations`` body as the real API does."""
    _check_params(body, CREATE_CONVERSATION_PARAMS)
    _check_items(body.get("items"), "items")


def check_add_items(body: Mapping[str, Any]) -> None:
    """Reject a ``POST /conversations/{id}/items`` body as the real API does."""
    _check_params(body, ADD_ITEMS_PARAMS)
    _check_items(body.get("items"), "items")
