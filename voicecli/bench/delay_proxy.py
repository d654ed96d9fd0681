"""A loopback TCP proxy that delays every chunk by half a round trip in each direction (`--rtt-ms`).

Why: the AWS post found the bidi advantage grows with network distance (2.4x locally, 3.5x on a remote runtime).
Putting this proxy between the bench and a local endpoint shows that growth on one machine, repeatably.

How: each direction is a delay line. A chunk read at time t is written at t + rtt/2, in order, so latency is
added without limiting throughput (a slow link is a different experiment). It listens on 127.0.0.1 only and
forwards only to a loopback address, so it can never become an open relay. It is bounded: at most
`max_queued_chunks` chunks (each at most `CHUNK_BYTES`) wait per direction (the reader stops reading when the
queue is full, which TCP turns into back-pressure), and at most `max_connections` connections at a time.
TCP handshakes are not delayed: both transports open their connection once and reuse it, so only per-message
latency matters for what is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time

CHUNK_BYTES = 65536
MAX_RTT_MS = 10_000.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class DelayProxy:
    """`async with DelayProxy(port, rtt_ms=50) as proxy:` then connect to `proxy.port` instead of `port`."""

    def __init__(self, target_port: int, rtt_ms: float, target_host: str = "127.0.0.1", *,
                 max_queued_chunks: int = 256, max_connections: int = 64) -> None:
        if not is_loopback(target_host):
            raise ValueError(f"the delay proxy forwards to loopback only, not {target_host!r}")
        if not 0 <= rtt_ms <= MAX_RTT_MS:
            raise ValueError(f"rtt_ms must be within 0..{MAX_RTT_MS:g}, not {rtt_ms}")
        self.target = (target_host, target_port)
        self.one_way_s = rtt_ms / 2000.0
        self.rtt_ms = rtt_ms
        self.port = 0
        self.connections = 0
        """Connections accepted so far (for checking that a persistent transport really opened one)."""
        self.bytes_forwarded = 0
        self._max_queued = max_queued_chunks
        self._max_connections = max_connections
        self._active: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> DelayProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aenter__(self) -> DelayProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def url(self, scheme: str = "ws") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._active):
            task.cancel()
        for task in list(self._active):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._active) >= self._max_connections:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._active.add(task)
        self.connections += 1
        writers = [writer]
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            writers.append(up_writer)
            await asyncio.gather(self._direction(reader, up_writer), self._direction(up_reader, writer))
        except (OSError, asyncio.CancelledError):  # cancelled only by stop(): end quietly, not as an error
            pass
        finally:
            self._active.discard(task)
            for each in writers:
                each.transport.abort()

    async def _direction(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Read chunks as they come; write each one `one_way_s` after it was read, in order."""
        line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=self._max_queued)

        async def read() -> None:
            try:
                while data := await source.read(CHUNK_BYTES):
                    await line.put((time.monotonic() + self.one_way_s, data))
            except ConnectionError:
                pass
            await line.put((time.monotonic() + self.one_way_s, b""))

        reading = asyncio.create_task(read())
        try:
            while True:
                due, data = await line.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        if sink.can_write_eof():
                            sink.write_eof()
                    return
                sink.write(data)
                self.bytes_forwarded += len(data)
                await sink.drain()
        except ConnectionError:
            return
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
