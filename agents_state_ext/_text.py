"""Text for error messages: a URL without its password, an exception on one line."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["one_line", "redact"]


def redact(url: str) -> str:
    """``url`` without its password, for error messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = f"{parts.username or ''}:***@"
        return urlunsplit(parts._replace(netloc=user + parts.netloc.rpartition("@")[2]))
    except ValueError:
        return "<unparsable URL>"


def one_line(exc: BaseException) -> str:
    """``exc`` as one line of text, for error messages."""
    return " ".join(str(exc).split()) or type(exc).__name__
