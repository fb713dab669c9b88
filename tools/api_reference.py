"""Write docs/api.md from the public names and their docstrings: ``python -m tools.api_reference``.

Each public name gets a section: its signature, the first paragraph of its docstring, and for a
class its public methods and properties, one line each. ``--check`` exits 1 when the file is
stale, so CI catches a public name or docstring changed without the reference.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import agents_state_ext
import agents_state_ext.testing
import agents_state_ext.types

TARGET = Path(__file__).resolve().parent.parent / "docs" / "api.md"
INTROS = {
    "agents_state_ext": "Everything below is importable from `agents_state_ext`.",
    "agents_state_ext.testing": "Fakes for your tests (see [testing](testing.md)).",
    "agents_state_ext.types": "The Literal types of the API, for your own annotations.",
}
HEADER = (
    "# API reference\n\nEvery public name, with its signature and what it is for. The docstrings "
    "in the source say more.\n"
)


def first_paragraph(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n\n")[0].replace("\n", " ").strip()


def signature(name: str, obj: Any) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return name
    params = list(sig.parameters.values())
    text = f"{name}{sig}".replace("'", "")
    if len(text) <= 96 or not params:
        return text
    lines = []
    star_done = False
    for param in params:
        if param.kind is param.KEYWORD_ONLY and not star_done:
            lines.append("    *,")
            star_done = True
        elif param.kind is param.VAR_POSITIONAL:
            star_done = True
        lines.append(f"    {str(param).replace(chr(39), '')},")
    tail = ")" if sig.return_annotation is sig.empty else f") -> {sig.return_annotation}"
    return f"{name}(\n" + "\n".join(lines) + "\n" + tail.replace("'", "")


# Private bases a public class was split into (for module size): their public members are
# documented on the class, base first, as if it defined them itself.
FOLDED_BASES = {
    "agents_state_ext._graph_tree.GraphTree",
    "agents_state_ext._model.base.WrappedModel",
    "agents_state_ext._model.base.WrappedProvider",
}


def _documented(cls: type) -> list[type]:
    """``cls`` and the bases of it listed in :data:`FOLDED_BASES`, base first."""
    folded = [b for b in cls.__mro__[1:] if f"{b.__module__}.{b.__qualname__}" in FOLDED_BASES]
    return [*reversed(folded), cls]


def _own(cls: type) -> dict[str, Any]:
    """``cls``'s members (after those of its bases in :data:`FOLDED_BASES`), then those of its
    private bases in the package (mixins)."""
    found: dict[str, Any] = {}
    for klass in _documented(cls):
        found.update(klass.__dict__)
    for base in cls.__mro__[1:]:
        if base.__name__.startswith("_") and base.__module__.startswith("agents_state_ext"):
            found.update({k: v for k, v in base.__dict__.items() if k not in found})
    return found


def members(cls: type) -> list[str]:
    lines = []
    for attr, value in _own(cls).items():
        if attr.startswith("_"):
            continue
        if isinstance(value, property):
            lines.append(f"- `{attr}` (property): {first_paragraph(value)}")
        elif isinstance(value, (staticmethod, classmethod)) or inspect.isfunction(value):
            func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            sig = inspect.signature(func)
            params = [p for n, p in sig.parameters.items() if n not in ("self", "cls")]
            shown = str(sig.replace(parameters=params)).replace("'", "")
            lines.append(f"- `{attr}{shown}`: {first_paragraph(func)}")
    return lines


def section(name: str, obj: Any, module: ModuleType) -> str:
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        head, body, extra = f"class {name}(*args, **kwargs)", first_paragraph(obj), []
    elif inspect.isclass(obj):
        head = f"class {signature(name, obj)}".removesuffix(" -> None")
        body, extra = first_paragraph(obj), members(obj)
    elif inspect.isfunction(obj):
        head, body, extra = signature(name, obj), first_paragraph(obj), []
    else:
        head, body, extra = f"{name} = {obj!r}", value_doc(name, module), []
    parts = [f"### `{name}`", "", "```text", head, "```", ""]
    if body:
        parts.append(body)
    if extra:
        parts += ["", *extra]
    return "\n".join(parts) + "\n"


def value_doc(name: str, package: ModuleType) -> str:
    """The docstring written under ``NAME = ...`` in the package's sources, if any."""
    root = Path(package.__file__ or "").parent
    for path in sorted(root.glob("*.py")):
        body = ast.parse(path.read_text()).body
        for node, after in itertools.pairwise(body):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            named = any(isinstance(t, ast.Name) and t.id == name for t in targets)
            if named and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                return " ".join(str(after.value.value).split("\n\n")[0].split())
    return ""


def render() -> str:
    out = [HEADER]
    for module in (agents_state_ext, agents_state_ext.testing, agents_state_ext.types):
        out.append(f"## `{module.__name__}`\n\n{INTROS[module.__name__]}\n")
        out.extend(section(name, getattr(module, name), module) for name in module.__all__)
    return "\n".join(out)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        return 0 if TARGET.read_text() == text else 1
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
