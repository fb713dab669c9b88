"""The ``agents-state-ext`` command line (Click + rich).

``demo`` and ``chat`` talk; ``inspect`` and ``export`` read a store (never changing it);
``import`` and ``delete`` write one; ``replay`` sends a stored attempt's request again (a new
attempt in the store); ``serve`` runs the chat API over HTTP.

Bad input — a missing file, an unknown conversation or node id, a budget that is not a positive
integer — prints one ``error: ...`` line to stderr and exits non-zero; never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from .. import __version__
from .chat import chat
from .demo import demo
from .inspect import inspect
from .replay import replay
from .serve import serve
from .transfer import delete, export, import_

__all__ = ["main"]


class _Commands(click.Group):
    """A group whose every failure is one line on stderr and a non-zero exit code."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = result if isinstance(result, int) else 0
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            code = exc.exit_code
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            code = 130
        except (KeyboardInterrupt, EOFError):
            code = 130
        except Exception as exc:  # the CLI's promise: one line, never a traceback
            click.echo(f"error: {_one_line(exc)}", err=True)
            code = 1
        if standalone_mode:
            sys.exit(code)
        return code


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if text != type(exc).__name__ else f"{text} (no details)"


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "-V", "--version", prog_name="agents-state-ext", message="%(prog)s %(version)s"
)
def main() -> None:
    """Correct, durable conversation state for the OpenAI Agents SDK."""


main.add_command(demo)
main.add_command(chat)
main.add_command(inspect)
main.add_command(replay)
main.add_command(export)
main.add_command(import_)
main.add_command(delete)
main.add_command(serve)
