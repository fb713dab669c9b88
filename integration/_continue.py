"""How a conversation goes on after an interrupted run: resume it or start a new turn,
in the same process or through ``dumps`` / ``loads``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.exceptions import ModelBehaviorError, UserError

from agents_state_ext import ConversationState

from ._interrupt import Held
from ._talk import Talk

__all__ = ["CONTINUATIONS", "SDK_REFUSALS", "CellSkipped", "Continuation"]

SDK_REFUSALS = (
    "A tool call already executed, but its output was not committed",
    "No processed response found in previous state",
)
"""What the SDK raises, by design, when asked to resume a run cancelled while a tool ran (it
will not run a side-effecting tool twice): the app goes on with a new turn instead, and the
follow-up judges that the conversation is still sound (docs/resume.md)."""


class CellSkipped(Exception):
    """This point means nothing for this continuation; the message says why."""


@dataclass(frozen=True)
class Continuation:
    """(a) resume, (b) dumps/loads then resume, (c) a new turn, (d) dumps/loads then a new turn,
    (e) another worker takes the ledger over from the store, then a new turn.

    The new turn is the cell's follow-up itself; after a resume the follow-up comes on top.
    Under (e) the ledger was held in a store from the start (``HeldState``, saved before every
    request and after every answer); the first worker leaves, saving, or dies at the point (its
    last save stands and its hold lapses), and a second worker holds it for the follow-up.
    """

    name: str
    loads: bool
    resume: bool
    store: bool = False

    async def run(self, talk: Talk, held: Held) -> ConversationState:
        """Go on from the interrupted run; the state the next turn runs on.

        A resumed run is driven to its end with ``held``, which then holds its result.
        """
        if self.store:
            if held.crashed and held.before_start:
                raise CellSkipped(
                    "the process died before the run's first request: a ledger held in a store "
                    "is saved at requests, so the input never reached the store (nothing was "
                    "sent either); the app sends it again, and loads_* cover its checkpoint"
                )
            return await talk.take_over(held.crashed)
        if self.resume and not (held.resumable or held.finished):
            raise CellSkipped(
                "the app holds no RunState of the run (a plain run that raised or was "
                "cancelled returns none): the new-turn continuation covers this point"
            )
        state = talk.state
        run_state: Any = None
        if self.loads:
            state, run_state = await ConversationState.loads(talk.agent, self._blob(talk, held))
        elif held.resumable:
            run_state = held.run_state()
        if self.resume and held.resumable:
            held.stopped = False
            try:
                await talk.drive(state, run_state, held)
            except (ModelBehaviorError, UserError) as error:
                if not str(error).startswith(SDK_REFUSALS):
                    raise
                held.refused = str(error)
        return state

    @staticmethod
    def _blob(talk: Talk, held: Held) -> str:
        if not held.crashed:
            return talk.state.dumps(held.dumpable())
        if held.checkpoint is None:
            raise AssertionError("no checkpoint was taken at the point")
        return held.checkpoint


CONTINUATIONS: dict[str, Continuation] = {
    c.name: c
    for c in (
        Continuation("resume", loads=False, resume=True),
        Continuation("loads_resume", loads=True, resume=True),
        Continuation("new_turn", loads=False, resume=False),
        Continuation("loads_new_turn", loads=True, resume=False),
        Continuation("store_takeover", loads=True, resume=False, store=True),
    )
}
"""Every continuation, by name."""
