"""The supported ``openai-agents`` range is declared once, installed, and tested minor by minor.

``pyproject.toml`` declares the range users can install, ``_compat.SUPPORTED_SDK`` names it in
every contract error, and ``.ci/sdk_versions`` runs the contract tests against one release of
each minor in it. These tests fail when the three drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from agents_state_ext import _compat

ROOT = Path(__file__).resolve().parent.parent
SUPPORTED = SpecifierSet(_compat.SUPPORTED_SDK)


def declared() -> Requirement:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [line] = [d for d in project["dependencies"] if Requirement(d).name == "openai-agents"]
    return Requirement(line)


def ci_versions() -> list[Version]:
    script = (ROOT / ".ci" / "sdk_versions").read_text()
    found = re.search(r"^VERSIONS=\(([^)]*)\)", script, re.MULTILINE)
    assert found, ".ci/sdk_versions must list the SDK releases it tests as VERSIONS=(...)"
    return [Version(v) for v in found.group(1).split()]


def minors(specifier: SpecifierSet) -> set[tuple[int, int]]:
    """The (major, minor) pairs with a release in ``specifier`` (majors 0 and 1 suffice)."""
    return {
        (major, minor)
        for major in (0, 1)
        for minor in range(100)
        if Version(f"{major}.{minor}.0") in specifier or Version(f"{major}.{minor}.99") in specifier
    }


def test_pyproject_declares_the_range_compat_names() -> None:
    assert declared().specifier == SUPPORTED


def test_the_range_takes_patch_releases_of_its_newest_minor() -> None:
    newest = max(minors(SUPPORTED))
    patch = Version(f"{newest[0]}.{newest[1]}.99")
    assert patch in SUPPORTED, f"openai-agents {patch} would be refused by {SUPPORTED}"


def test_the_installed_sdk_is_in_the_range() -> None:
    assert Version(_compat.SDK_VERSION) in SUPPORTED


def test_ci_tests_one_release_of_every_supported_minor() -> None:
    versions = ci_versions()
    assert [v for v in versions if v not in SUPPORTED] == []
    assert sorted({(v.major, v.minor) for v in versions}) == sorted(minors(SUPPORTED))
