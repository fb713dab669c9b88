"""What counts as a lost ``previous_response_id``, and records that say an attempt re-seeded."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from agents_state_ext import SQLiteStore
from agents_state_ext._attempts import AttemptRecord
from agents_state_ext.chat.reseed import previous_response_lost
from agents_state_ext.errors import PreviousResponseNotFoundError

REQUEST = httpx.Request("POST", "https://api.openai.com/v1/responses")


def api_error(
    kind: type[openai.APIStatusError], status: int, code: str | None, message: str
) -> openai.APIStatusError:
    body = {"message": message, "type": "invalid_request_error", "code": code}
    response = httpx.Response(status, json={"error": body}, request=REQUEST)
    return kind(message, response=response, body=body)


LOST = "Previous response with id 'resp_1' not found."


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        (PreviousResponseNotFoundError("gone", "resp_1", []), True),
        (PreviousResponseNotFoundError("gone", "resp_9", []), False),  # a later request's
        (api_error(openai.BadRequestError, 400, "previous_response_not_found", LOST), True),
        (api_error(openai.NotFoundError, 404, "previous_response_not_found", LOST), True),
        (api_error(openai.BadRequestError, 400, "previous_response_not_found", "gone"), True),
        (
            api_error(
                openai.BadRequestError,
                400,
                "previous_response_not_found",
                "Previous response with id 'resp_9' not found.",
            ),
            False,
        ),
        (api_error(openai.BadRequestError, 400, None, "Duplicate item found with id m"), False),
        (api_error(openai.NotFoundError, 404, None, "Response with id 'resp_1' not found."), False),
        (api_error(openai.InternalServerError, 500, "previous_response_not_found", LOST), False),
        (ValueError(LOST), False),
    ],
    ids=[
        "typed",
        "typed-other-id",
        "bad-request",
        "not-found",
        "unnamed",
        "other-id",
        "other-400",
        "other-404",
        "5xx",
        "plain",
    ],
)
def test_only_the_api_lost_cursor_error_for_this_cursor_counts(
    error: BaseException, lost: bool
) -> None:
    assert previous_response_lost(error, "resp_1") is lost


@pytest.mark.anyio
async def test_a_record_round_trips_its_reseed_and_older_records_still_load(
    tmp_path: Path,
) -> None:
    record = AttemptRecord(message_id="a1", attempt_id="att_1", reseeded_from="resp_1")
    data = json.loads(json.dumps(record.to_dict()))
    assert data["reseeded_from"] == "resp_1"
    assert AttemptRecord.from_dict(data) == record
    older = {k: v for k, v in data.items() if k != "reseeded_from"}
    assert AttemptRecord.from_dict(older).reseeded_from is None
    async with SQLiteStore(tmp_path / "db.sqlite") as store:
        await store.create_conversation("c", strategy="previous_response")
        await store.put_attempt("c", record)
        assert (await store.get_attempt("c", "att_1")).reseeded_from == "resp_1"
