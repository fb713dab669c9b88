"""The chat command's ``/replay``: a stored attempt's request sent again from a reopened file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from agents_state_ext.cli import main

OFFLINE = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, env=OFFLINE)


def stored(db: Path) -> dict[str, Any]:
    shown = run("inspect", str(db), "--json")
    assert shown.exit_code == 0, shown.stderr
    [chat] = json.loads(shown.stdout)["conversations"]
    return dict(chat)


def test_replay_in_a_reopened_chat_is_identical_or_says_what_it_overrode(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    first = run("chat", "--db", str(db), "--strategy", "replay", input="hi\nagain\n")
    assert first.exit_code == 0, first.stderr
    chat = stored(db)
    original = chat["attempts"][-1]
    script = (
        f"/replay {original['attempt_id'][:10]}\n"
        f"/replay {original['attempt_id']} temperature=0.9 model=gpt-4o\n"
        "/replay\n"
        f"/replay {original['attempt_id']} colour=blue\n"
    )
    second = run("chat", "--db", str(db), "--conversation", chat["id"], input=script)
    assert second.exit_code == 0, second.stderr
    out = second.stdout
    assert "identical request" in out and "request differs" in out
    assert "overridden: model, settings overridden" in out
    assert "usage: /replay A" in second.stderr + out
    assert "unknown replay option 'colour'" in second.stderr + out
    attempts = stored(db)["attempts"]
    replays = [r for r in attempts if r["replay_of"] == original["attempt_id"]]
    assert [r["model"] for r in replays] == [original["model"], "gpt-4o"]
    assert replays[0]["request_digest"] == original["request_digest"]
    assert replays[1]["sampling"]["temperature"] == 0.9
    assert {r["parent_user_id"] for r in replays} == {original["parent_user_id"]}
