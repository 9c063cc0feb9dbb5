"""A lean HTTP/1.1 keep-alive client for load benchmarks: one connection per simulated user.

Why: the server and the load generator share this machine's two cores. httpx's async client spent
about 4 ms of CPU per request in `bench_grading.py` (34% of a core at 80 requests/s), as much as
the server's own work, so the latencies it measured were mostly the client's. Load tools (wrk,
h2load, k6) keep their own cost small for the same reason. This client writes the request bytes
itself and reads `Content-Length` or chunked bodies; it sends `Accept-Encoding: gzip` like a
browser (so the server compresses as it would for a grader) and inflates bodies on demand.
"""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import dataclass, field
from urllib.parse import urlencode


@dataclass
class Answer:
    """A response: status, lower-cased headers and the raw (possibly gzip-compressed) body."""

    status: int
    headers: dict[str, str]
    raw: bytes

    @property
    def text(self) -> str:
        body = gzip.decompress(self.raw) if self.headers.get("content-encoding") == "gzip" else self.raw
        return body.decode()


@dataclass
class LeanClient:
    """One keep-alive connection to host:port sending the given cookies with every request."""

    host: str
    port: int
    cookies: dict[str, str]
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    _cookie_header: str = field(default="", init=False)

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self._cookie_header = "; ".join(f"{k}={v}" for k, v in self.cookies.items())

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()

    async def request(
        self,
        method: str,
        path: str,
        *,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        if self.writer is None or self.reader is None:
            await self.connect()
        assert self.writer is not None and self.reader is not None
        body = urlencode(form).encode() if form is not None else b""
        lines = [
            f"{method} {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Accept-Encoding: gzip",
            f"Cookie: {self._cookie_header}",
        ]
        if form is not None:
            lines += ["Content-Type: application/x-www-form-urlencoded", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        got: dict[str, str] = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                got[name.strip().lower()] = value.strip()
        if got.get("transfer-encoding") == "chunked":
            raw = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                raw += chunk[:-2]
        else:
            raw = await self.reader.readexactly(int(got.get("content-length", "0")))
        if got.get("connection") == "close":
            await self.close()
            self.reader = self.writer = None
        return Answer(status, got, raw)
