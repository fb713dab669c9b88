"""Token counts kept in the store: see :mod:`agents_state_ext.stores._token_counts`."""

from __future__ import annotations

from ..stores._token_counts import load_counts, save_counts

__all__ = ["load_counts", "save_counts"]
