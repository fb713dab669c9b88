"""``python -m agents_state_ext.testing serve-mock``: the mock Responses API on a local port.

Prints the base URL (``http://127.0.0.1:PORT/v1``) and serves until Ctrl-C / SIGTERM. Point a
client at it with ``OPENAI_BASE_URL=<that URL> OPENAI_API_KEY=sk-test``; the default model
answers ``echo: <last user message>``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agents_state_ext.testing")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve-mock",
        help="serve the stateful mock Responses / Conversations API over HTTP",
        description="Serve the stateful mock Responses / Conversations API over HTTP. "
        "Prints the base URL, then serves until Ctrl-C or SIGTERM.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1 (loopback)")
    serve.add_argument("--port", type=int, default=0, help="default: 0, a free port")
    serve.add_argument("--model", default="gpt-4.1", help="the model name answered by default")
    serve.add_argument(
        "--responder",
        metavar="MODULE:FUNCTION",
        help="a responder (ResponseContext -> Reply) to import; default: the echo",
    )
    serve.add_argument(
        "--echo-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="stream the echo one word per frame, this many seconds apart",
    )
    flags = serve.add_argument_group("behaviour flags (see MockResponsesAPI)")
    flags.add_argument(
        "--previous-response-not-found-status",
        type=int,
        default=400,
        metavar="STATUS",
        help="the status for an unknown previous_response_id; default: 400",
    )
    flags.add_argument(
        "--store-interrupted-streams",
        action="store_true",
        help="store a stream the client left before its end (not in its conversation)",
    )
    flags.add_argument(
        "--lock-conversations",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a second request on a conversation in flight gets 400 conversation_locked"
        " (default: on, as the real API)",
    )
    flags.add_argument(
        "--reject-orphan-tool-calls",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="reject a context with a function call without output",
    )
    flags.add_argument(
        "--append-incomplete-to-conversation",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="an incomplete response still appends to its conversation",
    )
    flags.add_argument(
        "--validate-requests",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="answer a malformed body with the real API's 400 (unknown parameter, role"
        " 'tool', ...; default: on, as the real API)",
    )
    serve.add_argument("--log-level", default="warning", help="uvicorn's; default: warning")
    serve.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``python -m agents_state_ext.testing`` command line."""
    args = _parser().parse_args(argv)
    from ._admin import resolve_responder
    from ._serve import serve_mock  # uvicorn loads only to serve

    try:
        responder = resolve_responder(args.responder, echo_delay=args.echo_delay)
        serve_mock(
            host=args.host,
            port=args.port,
            mock_options={
                "model": args.model,
                "previous_response_not_found_status": args.previous_response_not_found_status,
                "store_interrupted_streams": args.store_interrupted_streams,
                "lock_conversations": args.lock_conversations,
                "reject_orphan_tool_calls": args.reject_orphan_tool_calls,
                "append_incomplete_to_conversation": args.append_incomplete_to_conversation,
                "validate_requests": args.validate_requests,
            },
            responder=responder,
            log_level=args.log_level,
            parent=args.parent_pid,
        )
    except (OSError, ValueError, ImportError, AttributeError) as error:
        print(f"serve-mock: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
