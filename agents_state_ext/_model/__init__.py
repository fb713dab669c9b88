"""The wrapping models: the ledger's (:mod:`.tracked`) and the attempt record's (:mod:`.recorded`).

Both are :class:`~.base.WrappedModel`: the SDK's ten-argument model call is restated once, in
:mod:`.base`, as one :class:`~.base.ModelCall` value. :mod:`.wire` describes a request as it
went out.
"""

from __future__ import annotations

from .base import ModelCall, WrappedModel, WrappedProvider
from .recorded import RecordedModel, RecordedModelProvider, innermost
from .tracked import TrackedModel, TrackedModelProvider
from .wire import (
    REQUEST_ID_HEADER,
    RequestTap,
    WireRequest,
    model_name,
    settings_json,
    tool_definitions,
    tools_digest,
    wire_request,
)

__all__ = [
    "REQUEST_ID_HEADER",
    "ModelCall",
    "RecordedModel",
    "RecordedModelProvider",
    "RequestTap",
    "TrackedModel",
    "TrackedModelProvider",
    "WireRequest",
    "WrappedModel",
    "WrappedProvider",
    "innermost",
    "model_name",
    "settings_json",
    "tool_definitions",
    "tools_digest",
    "wire_request",
]
