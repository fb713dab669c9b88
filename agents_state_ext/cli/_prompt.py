"""Where ``chat`` reads its lines: a terminal (line editing, history, no echo while streaming),
or a pipe (a reader thread, so ``/stop`` still arrives while an answer streams).

Both sources have the same three calls: :meth:`prompt` reads a line at the prompt (``None``:
end of input, Ctrl-D, or Ctrl-C there), :meth:`typed` a line typed while an answer streams,
and :meth:`streaming` is the context an answer streams in; a line typed meanwhile that is not
``/stop`` is handed back with :meth:`push_back` and runs at the next prompt.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO

from rich.console import Console

__all__ = ["LineSource", "PipeLines", "TerminalLines", "open_lines"]


class LineSource:
    """Lines for the REPL; :func:`open_lines` picks the kind that fits stdin."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._back: collections.deque[str | None] = collections.deque()

    def push_back(self, line: str | None) -> None:
        """Read ``line`` again at the next prompt (``None``: the end of input)."""
        self._back.append(line)

    async def prompt(self, text: str) -> str | None:
        """Show ``text`` and read one line; ``None`` when the user leaves."""
        raise NotImplementedError

    async def typed(self) -> str | None:
        """The next line typed while an answer streams (``None``: end of input)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def streaming(self) -> Iterator[None]:
        """The context an answer streams in (a terminal stops echoing what is typed)."""
        yield


class PipeLines(LineSource):
    """Lines of a non-terminal stream, read on a daemon thread (prompts are printed as text)."""

    def __init__(self, console: Console, stream: IO[str], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(console)
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop = loop
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        while True:
            try:
                line = stream.readline()
            except (OSError, ValueError):
                line = ""
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line or None)
            if not line:
                return

    async def prompt(self, text: str) -> str | None:
        self.console.print(text, end="", markup=False, highlight=False)
        return await self.typed()

    async def typed(self) -> str | None:
        if self._back:
            return self._back.popleft()
        line = await self._queue.get()
        return None if line is None else line.rstrip("\r\n")


class TerminalLines(LineSource):
    """A terminal: GNU readline at the prompt, and no echo while an answer streams.

    Nothing runs while the chat waits at its prompt, so the prompt is read on the loop's own
    thread, the main one: readline edits the line (arrow keys, history of this session) and
    Ctrl-C / Ctrl-D end the chat cleanly. ``suspend`` is called around it to lift the chat's
    own Ctrl-C handler meanwhile (while streaming, Ctrl-C stops the answer instead).

    While an answer streams, the terminal keeps its line discipline but stops echoing: a
    ``/stop`` typed then is read without landing in the middle of the answer.
    """

    def __init__(
        self,
        console: Console,
        fd: int,
        loop: asyncio.AbstractEventLoop,
        suspend: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    ) -> None:
        super().__init__(console)
        self._fd = fd
        self._loop = loop
        self._suspend = suspend or contextlib.nullcontext
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._partial = b""
        # Once readline is loaded, input() edits lines and keeps history (without it, on a
        # Python built without readline, input() still works, unedited).
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401

    async def prompt(self, text: str) -> str | None:
        if self._back:
            line = self._back.popleft()
            if line is not None:
                self.console.print(text + line, markup=False, highlight=False)
            return line
        with self._suspend():
            try:
                return input(text)
            except (EOFError, KeyboardInterrupt):
                self.console.print()  # leave the prompt's line: the shell starts on a new one
                return None

    async def typed(self) -> str | None:
        return await self._queue.get()

    @contextlib.contextmanager
    def streaming(self) -> Iterator[None]:
        import termios

        try:
            saved = termios.tcgetattr(self._fd)
        except termios.error:
            saved = None
        if saved is not None:
            quiet = list(saved)
            quiet[3] &= ~termios.ECHO  # keep ICANON (whole lines) and ISIG (Ctrl-C)
            termios.tcsetattr(self._fd, termios.TCSANOW, quiet)
        self._loop.add_reader(self._fd, self._readable)
        try:
            yield
        finally:
            self._loop.remove_reader(self._fd)
            if saved is not None:
                termios.tcsetattr(self._fd, termios.TCSANOW, saved)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 4096)
        except OSError:
            data = b""
        if not data:  # Ctrl-D on an empty line
            self._loop.remove_reader(self._fd)
            self._queue.put_nowait(None)
            return
        self._partial += data
        *lines, self._partial = self._partial.split(b"\n")
        for line in lines:
            self._queue.put_nowait(line.decode(errors="replace").rstrip("\r"))


def open_lines(
    console: Console,
    loop: asyncio.AbstractEventLoop,
    suspend: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
) -> LineSource:
    """A terminal's lines when stdin and stdout are one (a TTY), else a pipe's."""
    stdin = sys.stdin
    try:
        fd = stdin.fileno()
        terminal = os.isatty(fd) and sys.stdout.isatty() and hasattr(signal, "SIGINT")
    except (AttributeError, OSError, ValueError):
        terminal = False
    if terminal and os.name == "posix":
        return TerminalLines(console, fd, loop, suspend)
    return PipeLines(console, stdin, loop)
