"""Test helpers for apps built on agents-state-ext.

:class:`MockResponsesAPI` is a stateful fake of the OpenAI Responses and Conversations APIs,
an ``httpx2`` transport, that stores what the model saw so tests can assert that nothing in a
conversation was duplicated or lost. It needs nothing beyond the package's own dependencies.
:class:`MockServer` runs the same mock as a loopback HTTP server process (uvicorn), for
multi-process tests and the command line (``python -m agents_state_ext.testing serve-mock``).
"""

from __future__ import annotations

from ._compact import decode_compaction
from ._faults import Fault, FaultKind
from ._http import mock_asgi_app
from ._items import describe_items
from ._mock_server import DEFAULT_BASE_URL, MockResponsesAPI
from ._process import MockServer, MockServerError
from ._records import FrameHook, RecordedRequest
from ._replies import Reply, ResponseContext, Usage
from ._responses import Responder, default_reply
from .tokens import FixedTokenCounter

__all__ = [
    "DEFAULT_BASE_URL",
    "Fault",
    "FaultKind",
    "FixedTokenCounter",
    "FrameHook",
    "MockResponsesAPI",
    "MockServer",
    "MockServerError",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ResponseContext",
    "Usage",
    "decode_compaction",
    "default_reply",
    "describe_items",
    "mock_asgi_app",
]
