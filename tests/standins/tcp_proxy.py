"""A loopback TCP proxy that can cut every connection on demand (test equipment for dropped connections).

Cutting the proxied connections is what a network drop or an endpoint restart looks like to the client, without
killing the shared endpoint process the other tests use.
"""

from __future__ import annotations

import asyncio
import contextlib


class CuttableProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.refuse = False
        """While True, new connections are closed at once (an endpoint that is down)."""
        self._flowing = asyncio.Event()
        self._flowing.set()

    async def start(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refuse:
            writer.close()
            return
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers.update((writer, up_writer))

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while data := await source.read(65536):
                    await self._flowing.wait()
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._writers.difference_update((writer, up_writer))

    def stall(self) -> None:
        """Stop forwarding in both directions, connections left open: a hung endpoint or a black-holed network."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def cut(self) -> None:
        """Abort every live connection, both directions."""
        for writer in list(self._writers):
            transport = writer.transport
            transport.abort()
        self._writers.clear()

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
