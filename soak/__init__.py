"""The soak of ``agents-state-ext serve``: N workers on PostgreSQL + Redis under a seeded load.

``python -m soak --workers 4 --conversations 40 --seconds 120 --kills 8`` starts the mock
server and N uvicorn workers (each on its own port) on a fresh PostgreSQL schema, drives many
conversations (send / stop / retry / edit / switch, stops aimed at another worker than the
streaming one, second drivers that must get 409), SIGKILLs and restarts workers, then checks
the store and the mock's transcripts (:mod:`.checks`). ``tests/test_soak.py`` runs a small size.

``python -m soak.faults`` is its fault mode (:mod:`.faults`): chats on a PostgreSQL and a Redis
of its own that it kills, restarts, cuts, blackholes and slows (issue 33);
``tests/test_soak_faults.py`` runs a small size.
"""

from __future__ import annotations

from .run import SoakOptions, run_soak, summary

__all__ = ["SoakOptions", "run_soak", "summary"]
