"""Which endpoint a bench talks to, and the (optionally delayed) route to it.

Why a module of its own: all three benches resolve the endpoint the same way as `voicecli chat` (the local one,
started on demand, or a URL), and all of them put the same delay proxy in front of it for `--rtt-ms`.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from voicecli.bench.delay_proxy import DelayProxy, is_loopback
from voicecli.config import Config
from voicecli.tts.local_endpoint import LocalEndpoint, ensure_local_endpoint
from voicecli.wire.protocol import STATS_PATH
from voicecli.wire.server_options import ServerOptions


class BenchError(RuntimeError):
    """A bench cannot run as asked; the message says why and what to do."""


@dataclass
class Target:
    host: str
    port: int
    token: str
    local: LocalEndpoint | None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def close(self) -> None:
        if self.local is not None:
            self.local.stop()


async def resolve_target(config: Config, progress: Callable[[str], None]) -> Target:
    """The configured endpoint: `local` (autostarted as `voicecli chat` does it, the same server) or an http(s)/ws(s)
    URL."""
    target = config.endpoint.target
    token = config.endpoint.token
    if target == "sagemaker":
        raise BenchError("voicecli bench measures a Kokoro endpoint it can reach directly: use --endpoint local or "
                         "a ws:// / http:// URL (SageMaker endpoints: run the container locally and bench that)")
    if target == "local":
        local = await ensure_local_endpoint(ServerOptions.from_config(config), config.endpoint.connect_timeout_s,
                                            config.endpoint.local.autostart, progress)
        return Target(local.host, local.port, token, local)
    parsed = urllib.parse.urlsplit(target)
    if parsed.scheme in ("https", "wss"):
        raise BenchError("voicecli bench speaks plain http/ws to the endpoint; put TLS endpoints behind a local "
                         "port forward")
    if parsed.hostname is None:
        raise BenchError(f"cannot read a host from the endpoint {target!r}")
    return Target(parsed.hostname, parsed.port or 80, token, None)


async def endpoint_stats(target: Target) -> dict[str, Any]:
    """The endpoint's GET /stats (engine, device, threads); empty when it has none."""
    try:
        async with httpx.AsyncClient(timeout=10.0) as client:
            response = await client.get(f"{target.url}{STATS_PATH}")
        if response.status_code == 200:
            data: dict[str, Any] = response.json()
            keys = ("engine", "device", "workers", "threads", "solo_threads", "cpus", "workers_auto", "threads_auto",
                    "max_batch", "batch_window_ms", "voices", "load_s", "warmup_s")
            return {k: data.get(k) for k in keys}
    except (httpx.HTTPError, ValueError):
        pass
    return {}


async def endpoint_cpu_s(url: str) -> float | None:
    """CPU seconds the endpoint process has used so far (its /stats `cpu_s`); None when it does not say."""
    try:
        async with httpx.AsyncClient(timeout=10.0) as client:
            response = await client.get(f"{url}{STATS_PATH}")
        value = response.json().get("cpu_s") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return float(value) if isinstance(value, int | float) else None


@contextlib.asynccontextmanager
async def route(target: Target, rtt_ms: float) -> AsyncIterator[str]:
    """The base URL to use at this injected RTT: the endpoint itself at 0, else a DelayProxy in front of it."""
    if rtt_ms <= 0:
        yield target.url
        return
    if not target.loopback:
        raise BenchError(f"--rtt-ms needs an endpoint on this machine (loopback), not {target.host}: a remote one "
                         "already has its own network round trip")
    async with DelayProxy(target.port, rtt_ms, target.host) as proxy:
        yield proxy.url("http")


def parse_rtts(values: list[str] | None) -> list[float]:
    """`--rtt-ms 0 --rtt-ms 50` or `--rtt-ms 0,50` -> [0.0, 50.0] (sorted, unique); default [0]."""
    rtts: set[float] = set()
    for value in values or ["0"]:
        for part in value.split(","):
            if part.strip():
                try:
                    rtt = float(part)
                except ValueError:
                    raise BenchError(f"--rtt-ms takes numbers of milliseconds, not {part!r}") from None
                if not 0 <= rtt <= 10_000:
                    raise BenchError(f"--rtt-ms {rtt:g} is outside 0..10000")
                rtts.add(rtt)
    return sorted(rtts)


def parse_counts(values: list[str] | None, default: str, flag: str) -> list[int]:
    """`--sessions 1,2,4` or repeated -> [1, 2, 4] (sorted, unique, each >= 1)."""
    counts: set[int] = set()
    for value in values or [default]:
        for part in value.split(","):
            if part.strip():
                try:
                    count = int(part)
                except ValueError:
                    raise BenchError(f"{flag} takes whole numbers, not {part!r}") from None
                if count < 1:
                    raise BenchError(f"{flag} values must be at least 1")
                counts.add(count)
    return sorted(counts)


def pick_named[T](spec: str, known: Mapping[str, T], flag: str) -> list[T]:
    """`--variants a,b` (or another `flag`'s comma list) as the named items, in the order given, each once; a clear
    error naming the unknown ones and every known name, or for a list with no name in it."""
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise BenchError(f"{flag}: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
    return [known[name] for name in dict.fromkeys(names)]
