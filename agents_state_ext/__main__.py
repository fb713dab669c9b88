"""``python -m agents_state_ext``: the same command line as the ``agents-state-ext`` script."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main(prog_name="agents-state-ext")
