"""When the Responses API has lost the response a chat attempt chains from.

Stored responses expire after a retention period, ``store=False`` ones are never retrievable
and a restarted server forgets them; a chat still holds the whole branch, so the attempt is
sent once more on a new chain seeded from it (see ``PreviousResponseStrategy.reseed``).
"""

from __future__ import annotations

import re

import openai

from ..errors import PreviousResponseNotFoundError

__all__ = ["NOT_FOUND_CODE", "previous_response_lost"]

NOT_FOUND_CODE = "previous_response_not_found"
"""The error ``code`` the API answers (HTTP 400, or 404 on some deployments) for a lost cursor."""


def previous_response_lost(error: BaseException, cursor: str) -> bool:
    """Whether ``error`` says the server no longer knows ``previous_response_id`` ``cursor``.

    The wrapped model raises :class:`~agents_state_ext.PreviousResponseNotFoundError`;
    openai's own ``BadRequestError`` / ``NotFoundError`` with the API's code is accepted too.
    Another id than ``cursor`` is a later request of the same run (after tool calls), which a
    re-seed would run twice: that is not a lost cursor of this attempt.
    """
    if isinstance(error, PreviousResponseNotFoundError):
        return error.previous_response_id == cursor
    if not isinstance(error, (openai.BadRequestError, openai.NotFoundError)):
        return False
    named = _NAMED.search(error.message)
    return error.code == NOT_FOUND_CODE and (named is None or named.group(1) == cursor)


_NAMED = re.compile(r"id '([^']+)'")  # "Previous response with id 'resp_…' not found."
