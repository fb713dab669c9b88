"""Store outages on demand: a fault-injecting TCP proxy, and PostgreSQL / Redis processes of
the test's own (never the machine's services) to kill and restart.

``FaultProxy`` sits between a store and its server, in the test's event loop: ``cut()`` closes
every connection through it (the next ones go through again), ``blackhole()`` keeps
connections open but forwards nothing (a partitioned network: nothing is refused, nothing
answers), ``refuse()`` closes every connection as it arrives, ``heal()`` forwards again,
``delay`` slows every chunk, and ``lose_reply_to(marker)`` drops the server's reply to one
request (a commit done whose answer never came back).

``Postgres`` and ``Redis`` run a server in a temporary directory on a free port, with
``kill()`` (SIGKILL) and ``start()`` again (``Postgres.restart()``: ``pg_ctl restart -m fast``).
Redis runs with no persistence at all (``--save "" --appendonly no``): a restart loses every
key. Both raise :class:`Missing`, saying why, when their binaries (or root, which PostgreSQL's
``runuser`` needs) are missing; ``tests/_outage.py`` turns that into a skip.

The tests (``tests/test_store_outages.py``, ``tests/test_chat_postgres_kill.py``) and the soak's
fault mode (:mod:`soak.faults`) share them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

PG_BIN = Path("/usr/lib/postgresql/15/bin")

Mode = Literal["pass", "blackhole", "refuse"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FaultProxy:
    """A TCP proxy from a local port to ``target_port`` that cuts, blackholes or refuses."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.port = 0
        self.mode: Mode = "pass"
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.delay = 0.0
        """Seconds each chunk waits before it is forwarded (a slow network), both ways."""
        self._marker: bytes | None = None
        self._swallow: set[asyncio.StreamWriter] = set()  # clients whose next reply is dropped
        self.held = asyncio.Event()
        """Set when the reply to the armed request (:meth:`lose_reply_to`) was dropped."""

    def lose_reply_to(self, marker: bytes) -> asyncio.Event:
        """Forward the next request holding ``marker``, then drop the server's reply to it.

        The server has done what it was asked, and the client hears nothing: what a crash
        between the two does. Returns :attr:`held`, set once the reply was dropped.
        """
        self._marker = marker
        self.held.clear()
        return self.held

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def cut(self) -> None:
        """Close every connection through the proxy now; new ones go through as the mode says."""
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def blackhole(self) -> None:
        """Forward nothing from now on, on open connections and new ones; refuse nothing."""
        self.mode = "blackhole"

    def refuse(self) -> None:
        """Cut every connection, and close each new one as it arrives."""
        self.mode = "refuse"
        self.cut()

    def heal(self) -> None:
        """Forward again (what was dropped meanwhile stays dropped)."""
        self.mode = "pass"

    def proxied(self, url: str) -> str:
        """``url`` with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")
        where = f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=f"{netloc[0]}{netloc[1]}{where}"))

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "refuse":
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(self._pump(source, sink, (writer, up_writer), writer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
        client: asyncio.StreamWriter,
    ) -> None:
        try:
            while data := await source.read(65536):
                if self.delay:
                    await asyncio.sleep(self.delay)
                if sink is client and client in self._swallow:
                    self._swallow.discard(client)
                    self.held.set()
                    return  # the reply is lost, and the connection with it
                if sink is not client and self._marker is not None and self._marker in data:
                    self._marker = None
                    self._swallow.add(client)
                if self.mode == "pass":
                    sink.write(data)
                    await sink.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for writer in pair:
                writer.transport.abort()
                self._writers.discard(writer)


class Missing(RuntimeError):
    """A server of one's own cannot be run here (its binary, or root, is missing)."""


def _need(binary: Path | str) -> str:
    found = shutil.which(str(binary))
    if found is None:
        raise Missing(f"store outage runs need {binary} (not found)")
    return found


class Postgres:
    """A PostgreSQL server of the test's own, run as the ``postgres`` user.

    Its data directory is a new one in the system's temporary directory (the ``postgres`` user
    cannot reach pytest's, which only root may enter); :meth:`stop` removes it.
    """

    def __init__(self) -> None:
        _need(PG_BIN / "initdb")
        _need("runuser")
        if os.geteuid() != 0:
            raise Missing("store outage runs start PostgreSQL with runuser: they need root")
        self.root = Path(tempfile.mkdtemp(prefix="state-ext-pg-"))
        self.root.chmod(0o777)
        self.data = self.root / "pgdata"
        self.port = free_port()
        self._as_postgres(PG_BIN / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres")
        self._pid: int | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = self.data / "log"
        ctl = PG_BIN / "pg_ctl"
        self._as_postgres(ctl, "-D", self.data, "-o", options, "-l", log, "-w", "start")
        self._pid = int((self.data / "postmaster.pid").read_text().split()[0])

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend (as a machine crash would)."""
        if self._pid is not None:
            subprocess.run(["pkill", "-9", "-P", str(self._pid)], check=False)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            self._wait_gone(self._pid)
            self._pid = None
            with contextlib.suppress(FileNotFoundError):
                (self.data / "postmaster.pid").unlink()

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: backends told to end, a clean shutdown, a new start."""
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        ctl = PG_BIN / "pg_ctl"
        log = self.data / "log"  # else the new server holds pg_ctl's output open: run() waits
        self._as_postgres(
            ctl, "-D", self.data, "-o", options, "-l", log, "-m", "fast", "-w", "restart"
        )
        self._pid = int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        """Stop the server at once and remove its data directory."""
        if self._pid is not None:
            self._as_postgres(PG_BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "stop")
            self._pid = None
        shutil.rmtree(self.root, ignore_errors=True)

    def _as_postgres(self, *args: object) -> None:
        command = ["runuser", "-u", "postgres", "--", *map(str, args)]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    @staticmethod
    def _wait_gone(pid: int) -> None:
        for _ in range(500):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.01)


class Redis:
    """A redis-server of the test's own, keeping nothing on disk: a restart loses every key."""

    def __init__(self, root: Path) -> None:
        self.binary = _need("redis-server")
        self.dir = root
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.dir)]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        for _ in range(500):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
                return
            time.sleep(0.01)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def stop(self) -> None:
        self.kill()
