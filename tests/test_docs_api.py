"""The API reference documents every public name of the package and of its testing kit."""

from __future__ import annotations

from pathlib import Path

import pytest

import agents_state_ext
import agents_state_ext.testing

API = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
NAMES = [*agents_state_ext.__all__, *agents_state_ext.testing.__all__]


@pytest.mark.parametrize("name", NAMES)
def test_every_public_name_has_a_section(name: str) -> None:
    assert f"### `{name}`" in API


def test_the_reference_is_generated_from_the_current_docstrings() -> None:
    from tools.api_reference import render

    assert render() == API, "docs/api.md is stale: run `python -m tools.api_reference`"
