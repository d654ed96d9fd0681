"""The delaying proxy used by `--rtt-ms`: bytes pass unchanged and in order, each way is delayed, loopback only."""

from __future__ import annotations

import asyncio
import time

import pytest

from voicecli.bench.delay_proxy import DelayProxy


async def echo_server() -> asyncio.Server:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(echo, "127.0.0.1", 0)


async def test_bytes_round_trip_unchanged_in_order_and_at_least_one_rtt_later() -> None:
    server = await echo_server()
    port = server.sockets[0].getsockname()[1]
    async with DelayProxy(port, rtt_ms=60) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        payload = b"".join(bytes([i % 251]) * 1000 for i in range(300))  # 300 kB, many chunks
        started = time.monotonic()
        writer.write(payload)
        await writer.drain()
        received = await reader.readexactly(len(payload))
        elapsed = time.monotonic() - started
        writer.close()
        assert received == payload
        assert elapsed >= 0.06  # the delay line adds rtt/2 each way: a lower bound, not a speed threshold
        assert proxy.connections == 1
    server.close()
    await server.wait_closed()


async def test_zero_rtt_passes_through() -> None:
    server = await echo_server()
    port = server.sockets[0].getsockname()[1]
    async with DelayProxy(port, rtt_ms=0) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"ping")
        assert await reader.readexactly(4) == b"ping"
        writer.close()
    server.close()
    await server.wait_closed()


def test_only_loopback_targets_and_bounded_delays_are_accepted() -> None:
    with pytest.raises(ValueError, match="loopback"):
        DelayProxy(80, 50, "93.184.216.34")
    with pytest.raises(ValueError, match="rtt_ms"):
        DelayProxy(80, -1)
    with pytest.raises(ValueError, match="rtt_ms"):
        DelayProxy(80, 60_000)
    DelayProxy(80, 50, "localhost")
    DelayProxy(80, 50, "::1")
