"""MockResponsesAPI: reasoning items, their encrypted content and the reasoning rules."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
ENC = ["reasoning.encrypted_content"]


@pytest.fixture
def mock_options() -> dict[str, Any]:
    return {"model": "gpt-5"}


async def post(mock: MockResponsesAPI, **body: Any) -> httpx2.Response:
    body.setdefault("model", "gpt-5")
    async with httpx2.AsyncClient(transport=mock.transport) as http:
        return await http.post(f"{mock.base_url}/responses", json=body)


def events_of(response: httpx2.Response) -> list[dict[str, Any]]:
    frames = [f for f in response.text.split("\n\n") if f]
    return [json.loads(f.split("\n")[1].removeprefix("data: ")) for f in frames]


@pytest.mark.parametrize(
    ("model", "flag", "reasons"),
    [
        ("gpt-5", None, True),
        ("o3-mini", None, True),
        ("o4-mini", None, True),
        ("codex-mini-latest", None, True),
        ("gpt-4.1", None, False),
        ("gpt-4.1", True, True),
        ("gpt-5", False, False),
    ],
)
async def test_reasoning_by_model_name_or_forced(
    model: str, flag: bool | None, reasons: bool
) -> None:
    async with MockResponsesAPI(reasoning=flag) as mock:
        body = (await post(mock, model=model, input="hi")).json()
    types = [item["type"] for item in body["output"]]
    assert types == (["reasoning", "message"] if reasons else ["message"])
    details = body["usage"]["output_tokens_details"]["reasoning_tokens"]
    assert (details > 0) == reasons
    if reasons:
        assert body["output"][0] == {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Thinking."}],
        }
        assert body["usage"]["output_tokens"] >= details + 1


async def test_scripted_reasoning_is_not_doubled(mock: MockResponsesAPI) -> None:
    mock.enqueue(
        Reply.reasoning("plan the call") + Reply.tool_call("f", {}),
        Reply.text("done", reasoning="wrap up"),
        Reply.tool_calls([("a", {}), ("b", {})], reasoning="two"),
    )
    first = (await post(mock, input="hi")).json()
    assert [i["type"] for i in first["output"]] == ["reasoning", "function_call"]
    assert first["output"][0]["summary"][0]["text"] == "plan the call"
    assert first["usage"]["output_tokens_details"]["reasoning_tokens"] == 3
    call = first["output"][1]
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "ok"}
    second = (await post(mock, input=[output], previous_response_id=first["id"])).json()
    assert [i["type"] for i in second["output"]] == ["reasoning", "message"]
    third = (await post(mock, input="again")).json()
    assert [i["type"] for i in third["output"]] == ["reasoning", "function_call", "function_call"]


async def test_encrypted_content_only_when_included(mock: MockResponsesAPI) -> None:
    plain = (await post(mock, input="hi")).json()["output"][0]
    assert "encrypted_content" not in plain
    sealed = (await post(mock, input="hi", include=ENC)).json()["output"][0]
    assert sealed["encrypted_content"].startswith("enc1.")
    mock.enqueue(Reply.reasoning("x", encrypted=False) + Reply.text("y"))
    opted_out = (await post(mock, input="hi", include=ENC)).json()["output"][0]
    assert "encrypted_content" not in opted_out


async def test_encrypted_content_on_a_non_reasoning_model_is_rejected(
    mock: MockResponsesAPI,
) -> None:
    response = await post(mock, model="gpt-4.1", input="hi", include=ENC)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": "Encrypted content is not supported with this model.",
        "type": "invalid_request_error",
        "param": "include",
        "code": None,
    }


async def test_stateless_replay_with_encrypted_content(mock: MockResponsesAPI) -> None:
    first = (await post(mock, input="hi", include=ENC, store=False)).json()
    replay = [{"role": "user", "content": "hi"}, *first["output"], {"role": "user", "content": "2"}]
    ok = await post(mock, input=replay, include=ENC, store=False)
    assert ok.status_code == 200
    without_id = [dict(replay[1]), replay[2], replay[3]]
    del without_id[0]["id"]
    del without_id[1]["id"]
    assert (await post(mock, input=without_id, store=False)).status_code == 200
    tampered = [dict(replay[1]), replay[2], replay[3]]
    tampered[0]["encrypted_content"] += "x"
    error = (await post(mock, input=tampered, store=False)).json()["error"]
    assert error["code"] == "invalid_encrypted_content"
    assert error["message"].startswith("The encrypted content for item rs_1 could not be verified")


async def test_unheld_reasoning_id_is_not_found(mock: MockResponsesAPI) -> None:
    first = (await post(mock, input="hi", store=False)).json()
    response = await post(mock, input=[*first["output"], {"role": "user", "content": "2"}])
    assert response.status_code == 404
    assert response.json()["error"]["message"] == (
        "Item with id 'rs_1' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input."
    )
    assert response.json()["error"]["param"] == "input"


async def test_expired_response_forgets_its_items(mock: MockResponsesAPI) -> None:
    first = (await post(mock, input="hi")).json()
    again = [*first["output"], {"role": "user", "content": "2"}]
    assert (await post(mock, input=again)).status_code == 200
    mock.expire_response(first["id"])
    assert (await post(mock, input=again)).status_code == 404


async def test_output_item_without_its_reasoning_item(mock: MockResponsesAPI) -> None:
    first = (await post(mock, input="hi")).json()
    message = first["output"][1]
    response = await post(mock, input=[message, {"role": "user", "content": "2"}])
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "Item 'msg_2' of type 'message' was provided without its required 'reasoning' item: 'rs_1'."
    )
    bare = {k: v for k, v in message.items() if k != "id"}
    assert (await post(mock, input=[bare, {"role": "user", "content": "2"}])).status_code == 200
    mock.enqueue(Reply.tool_call("f", {}))
    call = (await post(mock, input="go")).json()["output"][1]
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "ok"}
    error = (await post(mock, input=[call, output])).json()["error"]
    assert f"Item '{call['id']}' of type 'function_call'" in error["message"]


@pytest.mark.parametrize("after", ["end", "user", "reasoning"])
async def test_reasoning_without_its_following_item(mock: MockResponsesAPI, after: str) -> None:
    first = (await post(mock, input="hi")).json()
    rs = first["output"][0]
    other = (await post(mock, input="hi", include=ENC)).json()["output"][0]
    tail = {"end": [], "user": [{"role": "user", "content": "x"}], "reasoning": [other]}[after]
    response = await post(mock, input=[rs, *tail])
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "Item 'rs_1' of type 'reasoning' was provided without its required following item."
    )


async def test_reasoning_with_neither_id_nor_content(mock: MockResponsesAPI) -> None:
    bare = {"type": "reasoning", "summary": []}
    message = {"role": "assistant", "content": "x"}
    error = (await post(mock, input=[bare, message])).json()["error"]
    assert (error["message"], error["code"], error["param"]) == (
        "Invalid item",
        "invalid_item",
        "input",
    )
    conversation = mock.create_conversation()
    async with httpx2.AsyncClient(transport=mock.transport) as http:
        added = await http.post(
            f"{mock.base_url}/conversations/{conversation}/items", json={"items": [bare]}
        )
    assert added.json()["error"]["code"] == "invalid_item"


async def test_rules_can_be_switched_off() -> None:
    async with MockResponsesAPI(enforce_reasoning_rules=False) as mock:
        first = (await post(mock, input="hi", store=False)).json()
        assert (await post(mock, input=first["output"][:1])).status_code == 200
        assert (await post(mock, model="gpt-4.1", input="x", include=ENC)).status_code == 200


async def test_streamed_reasoning_events(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("ok", reasoning="one two three"))
    events = events_of(await post(mock, input="hi", stream=True, include=ENC))
    types = [e["type"] for e in events]
    assert types[:9] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
    ]
    assert types.index("response.output_item.done") == 9
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    added, done = events[2]["item"], events[9]["item"]
    assert added == {"type": "reasoning", "id": "rs_1", "summary": []}
    assert done["encrypted_content"].startswith("enc1.")
    for event in events[3:9]:
        assert (event["item_id"], event["output_index"], event["summary_index"]) == ("rs_1", 0, 0)
    assert "".join(e["delta"] for e in events[4:7]) == "one two three"
    assert events[7]["text"] == "one two three"
    assert events[-1]["response"]["output"][0] == done


@pytest.mark.parametrize("kind", ["stream_error", "response_failed"])
async def test_failure_inside_a_stream(mock: MockResponsesAPI, kind: str) -> None:
    fault = Fault.stream_error(2) if kind == "stream_error" else Fault.response_failed(2)
    mock.inject(fault)
    response = await post(mock, model="gpt-4.1", input="hi", stream=True)
    assert response.status_code == 200
    events = events_of(response)
    assert [e["sequence_number"] for e in events] == [0, 1, 2]
    last = events[-1]
    if kind == "stream_error":
        assert last == {
            "type": "error",
            "code": "server_error",
            "message": "An error occurred while processing your request.",
            "param": None,
            "sequence_number": 2,
        }
    else:
        assert last["type"] == "response.failed"
        assert last["response"]["status"] == "failed"
        assert last["response"]["error"]["code"] == "server_error"
    assert mock.response_ids == []
    assert (await post(mock, model="gpt-4.1", input="hi")).json()["status"] == "completed"
    assert Fault.from_dict(fault.to_dict()) == fault


@pytest.mark.parametrize("fault", [Fault.stream_error(1), Fault.response_failed(1)])
async def test_failure_kinds_without_stream_are_500(mock: MockResponsesAPI, fault: Fault) -> None:
    mock.inject(fault)
    response = await post(mock, input="hi")
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "server_error"
    assert mock.response_ids == []


async def test_a_failed_body_for_a_non_streamed_request(mock: MockResponsesAPI) -> None:
    from agents import Agent, Runner, set_tracing_disabled
    from agents.exceptions import ModelBehaviorError
    from openai.types.responses import Response

    set_tracing_disabled(True)
    fault = Fault.response_failed(0, "it broke", body=True)
    mock.inject(fault)
    response = await post(mock, model="gpt-4.1", input="hi")
    assert response.status_code == 200
    body = Response.model_validate(response.json(), strict=False)
    assert (body.status, body.output, body.usage) == ("failed", [], None)
    assert body.error is not None and (body.error.code, body.error.message) == (
        "server_error",
        "it broke",
    )
    assert mock.response_ids == []
    assert Fault.from_dict(json.loads(json.dumps(fault.to_dict()))) == fault
    mock.inject(fault)
    with pytest.raises(ModelBehaviorError, match=r"response\.failed"):
        await Runner.run(Agent(name="a", model=mock.model()), "hi")
    assert mock.response_ids == []
    assert (await post(mock, model="gpt-4.1", input="hi")).json()["status"] == "completed"


@pytest.mark.parametrize("streamed", [False, True])
async def test_agents_sdk_runs_on_a_reasoning_model(mock: MockResponsesAPI, streamed: bool) -> None:
    from agents import Agent, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    @function_tool
    def lookup() -> str:
        """Look it up."""
        return "found"

    mock.enqueue(Reply.tool_call("lookup", {}, reasoning="need data"), Reply.text("done"))
    agent = Agent(name="a", model=mock.model("gpt-5"), tools=[lookup])
    if streamed:
        run = Runner.run_streamed(agent, "hi")
        async for _ in run.stream_events():
            pass
        final = run.final_output
    else:
        final = (await Runner.run(agent, "hi")).final_output
    assert final == "done"
    second = mock.response_requests[1]["input"]
    assert [i.get("type") for i in second[1:3]] == ["reasoning", "function_call"]
    assert mock.requests[1].status == 200
