"""The page's JavaScript uses exactly the event names and statuses the server defines.

The SSE event names live in ``agents_state_ext._event_names`` and the statuses in
``agents_state_ext.types`` / ``agents_state_ext._status``; the page (``server/web``) restates
them as string literals. These tests read the page's files (a small JavaScript lexer: strings,
template literals, comments and regular expressions are told apart) and fail when the page
listens for an event the server never sends, ignores one it sends without saying so below, or
compares a status to a word that is no status.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from importlib import resources

import pytest

from agents_state_ext._event_names import (
    ATTEMPT_EVENT_KINDS,
    EVENT_NAMES,
    FINAL_EVENTS,
    WIRE_NAMES,
)
from agents_state_ext._status import ATTEMPT_STATUSES, NODE_STATUSES, UNFINISHED

IGNORED_EVENTS: dict[str, str] = {}
"""Events the server sends that the page deliberately does not handle, each with why."""

PAGE_ENDINGS: dict[str, str] = {
    "refused": "the page's own ending: the server refused the request before any stream began",
}
"""Words the page keeps beside statuses that are no status of the server's, each with why."""

STATUSES = {*NODE_STATUSES, *ATTEMPT_STATUSES}
STATUS_HOLDERS = {"status", "ending", "status_before_invalid"}  # names the page keeps a status in
STATUS_FUNCTIONS = {"statusWord", "badge", "inFlight"}  # functions the page passes one to
COMPARE = {"===", "!==", "==", "!="}
GIVE = {"=", ":", "||", "??"}
_PUNCT = re.compile(r"===|!==|==|!=|\?\?|\|\||&&|=>|\.\.\.|[-+*/%<>=!&|^~?:;,.()\[\]{}#@]")
_WORD = re.compile(r"[A-Za-z_$][\w$]*|\d[\w.]*")
_REGEX_AFTER = set("(,=:[!&|?{};") | {"return", "=>", "===", "!==", "==", "!=", "&&", "||"}

Token = tuple[str, str]  # (kind, text): kind is "str", "tmpl" (template text), "name", "punct"


def _string(src: str, start: int) -> tuple[str, int]:
    """The body of the string literal opening at ``start`` and the index after it."""
    quote, i, chars = src[start], start + 1, []
    while src[i] != quote:
        if src[i] == "\\":
            i += 1
        chars.append(src[i])
        i += 1
    return "".join(chars), i + 1


def _regex_end(src: str, start: int) -> int:
    i, in_class = start + 1, False
    while in_class or src[i] != "/":
        if src[i] == "\\":
            i += 1
        elif src[i] == "[":
            in_class = True
        elif src[i] == "]":
            in_class = False
        i += 1
    return i + 1


def lex(src: str) -> Iterator[Token]:
    """The tokens of a JavaScript source; a template literal's text is one ``str`` token per
    piece, and the code in its ``${...}`` is lexed as code."""
    i, braces, last = 0, [], ""  # braces: open-brace depth of each ${ we are inside
    while i < len(src):
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("//", i):
            end = src.find("\n", i)
            i = len(src) if end < 0 else end
        elif src.startswith("/*", i):
            i = src.index("*/", i) + 2
        elif c in "\"'":
            text, i = _string(src, i)
            last = "str"
            yield "str", text
        elif c == "`" or (c == "}" and braces and braces[-1] == 0):
            if c == "}":
                braces.pop()
            j = i + 1
            while src[j] != "`" and not src.startswith("${", j):
                j += 2 if src[j] == "\\" else 1
            yield "tmpl", src[i + 1 : j]
            if src[j] == "`":
                i = j + 1
            else:
                braces.append(0)
                i = j + 2
            last = "`"
        elif c == "/" and last in _REGEX_AFTER:
            i = _regex_end(src, i)
            last = "regex"
        elif word := _WORD.match(src, i):
            last = word.group()
            i = word.end()
            yield "name", last
        else:
            punct = _PUNCT.match(src, i)
            assert punct, f"cannot lex {src[i : i + 20]!r}"
            last = punct.group()
            i = punct.end()
            if braces and last == "{":
                braces[-1] += 1
            elif braces and last == "}":
                braces[-1] -= 1
            yield "punct", last


def page_tokens() -> dict[str, list[Token]]:
    web = resources.files("agents_state_ext.server.web")
    found = {f.name: list(lex(f.read_text("utf-8"))) for f in web.iterdir() if f.name[-3:] == ".js"}
    assert found, "no JavaScript found beside the page"
    return found


def _triples(tokens: list[Token]) -> Iterator[tuple[Token, Token, Token]]:
    return zip(tokens, tokens[1:], tokens[2:], strict=False)


def listened_events(tokens: list[Token]) -> set[str]:
    """The names the page compares an SSE event's name to (``event === "delta"``; not a
    member such as ``data.event``)."""
    found = set()
    for before, (a, op, b) in zip([("", ""), *tokens], _triples(tokens), strict=False):
        if op[1] not in COMPARE:
            continue
        if a == ("name", "event") and before != ("punct", ".") and b[0] == "str":
            found.add(b[1])
        if b == ("name", "event") and a[0] == "str":
            found.add(a[1])
    return found


def status_words(tokens: list[Token]) -> set[str]:
    """Every string the page compares a status to, keeps as one, or passes where one goes."""
    found = set()
    for a, op, b in _triples(tokens):
        held = a[0] == "name" and a[1] in STATUS_HOLDERS and b[0] == "str"
        if held and op[1] in COMPARE | GIVE:
            found.add(b[1])
        if b[0] == "name" and b[1] in STATUS_HOLDERS and a[0] == "str" and op[1] in COMPARE:
            found.add(a[1])
        if a[0] == "name" and a[1] in STATUS_FUNCTIONS and op[1] == "(" and b[0] == "str":
            found.add(b[1])
    return found


def _block_after(tokens: list[Token], *head: Token) -> list[Token]:
    """The tokens between the braces of the first block that follows ``head``."""
    n = len(head)
    at = next(i for i in range(len(tokens)) if tuple(tokens[i : i + n]) == head)
    start = tokens.index(("punct", "{"), at) + 1
    depth, end = 1, start
    while depth:
        depth += {("punct", "{"): 1, ("punct", "}"): -1}.get(tokens[end], 0)
        end += 1
    return tokens[start : end - 1]


def test_the_server_sends_every_name_and_each_kind_has_one() -> None:
    assert set(WIRE_NAMES) == set(ATTEMPT_EVENT_KINDS)
    assert set(WIRE_NAMES.values()) | set(FINAL_EVENTS) == set(EVENT_NAMES)
    assert not set(WIRE_NAMES.values()) & set(FINAL_EVENTS)


def test_the_page_listens_for_exactly_the_events_the_server_sends() -> None:
    listened = set().union(*(listened_events(tokens) for tokens in page_tokens().values()))
    assert listened, "the lexer found no event comparison: is the page read right?"
    assert sorted(listened - set(EVENT_NAMES)) == []  # names the server never sends
    assert sorted(set(EVENT_NAMES) - listened) == sorted(IGNORED_EVENTS)
    assert not set(IGNORED_EVENTS) & listened


def test_every_status_word_of_the_page_is_a_status() -> None:
    words = set().union(*(status_words(tokens) for tokens in page_tokens().values()))
    assert {"queued", "complete", "refused"} <= words, "is the page read right?"
    assert sorted(words - STATUSES - set(PAGE_ENDINGS)) == []
    assert not set(PAGE_ENDINGS) & STATUSES


def test_the_page_names_every_status_and_its_in_flight_ones_are_the_unfinished() -> None:
    model = page_tokens()["model.js"]
    words = _block_after(model, ("name", "WORDS"), ("punct", "="))
    keys = {a[1] for a, colon in itertools.pairwise(words) if colon == ("punct", ":")}
    assert keys == set(NODE_STATUSES)
    in_flight = _block_after(model, ("name", "function"), ("name", "inFlight"))
    assert {text for kind, text in in_flight if kind == "str"} == set(UNFINISHED)


def test_the_style_sheet_styles_only_statuses() -> None:
    css = resources.files("agents_state_ext.server.web").joinpath("style.css").read_text("utf-8")
    styled = set(re.findall(r"\.status-([\w-]+)", css))
    assert styled, "no status style found"
    assert sorted(styled - STATUSES) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('if (event === "delta") x = `a${b ? `c${d}` : "e"}f`;', {"delta"}),
        ('// event === "gone"\nconst r = /"x/; if ("tool_call" === event) y();', {"tool_call"}),
        ('if (data.event === "nope" || event !== "record") z();', {"record"}),
    ],
)
def test_the_lexer_reads_what_the_page_writes(source: str, expected: set[str]) -> None:
    assert listened_events(list(lex(source))) == expected
