"""The Kokoro endpoint's Starlette app: the SageMaker container contract plus the streaming protocol.

Routes (declared once, in ROUTES):
  GET  /ping                               200 "OK" once the model is loaded and warmed up, 503 before;
                                           `?details=1`: the same status with JSON (engine, workers, threads).
  POST /invocations                        batch or streamed synthesis (see voicecli.wire.protocol, "HTTP route").
  POST /v1/audio/speech                    the same, in OpenAI's speech API shape (voicecli.wire.protocol,
                                           "OpenAI-compatible route"), so OpenAI TTS clients work unchanged.
  WS   /invocations-bidirectional-stream   the session protocol (see voicecli.wire.protocol).
  GET  /stats                              JSON counters for operators and tests.

With a token configured, POST and the WebSocket require it; /ping and /stats stay open (health checks, and the
counters reveal no request content). Without a token they serve only requests with no Origin or a loopback Origin
(a web page must not drive the user's local server), and a server bound to one address answers every route only
to requests addressed to a loopback name or that address (a DNS-rebinding page must not read it; access.py). Open
sessions and POSTs being answered share one concurrency budget (admission.py); a POST takes its slot only once its
whole body arrived, which must happen within BODY_TIMEOUT_S. A POST whose client goes away stops being synthesized.
Limits and the token: docs/protocol.md, "Access control and limits".

The model loads in the background after start-up so the port answers /ping (503) at once: SageMaker and the
local client both poll /ping rather than wait on a silent socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from voicecli.wire.protocol import (
    CONTENT_TYPES,
    DEFAULTS,
    INVOCATIONS_PATH,
    OPENAI_SPEECH_PATH,
    PING_PATH,
    SAMPLE_RATE,
    STATS_PATH,
    WS_PATH,
    Error,
    ErrorCode,
    InvocationRequest,
    Limits,
    ProtocolError,
    Timings,
    encode_message,
    timing_headers,
)
from voicecli.wire.server_options import DEFAULT_HOST, ServerOptions
from voicecli_endpoint.access import (
    bearer_matches,
    forbidden_host_response,
    forbidden_origin_response,
    host_allowed,
    origin_allowed,
    token_from_environment,
    too_many_sessions_response,
    unauthorized_response,
)
from voicecli_endpoint.admission import Admission
from voicecli_endpoint.audio_encoding import DEFAULT_MP3_KBPS, mp3_bytes, stream_encoder, to_pcm16, wav_bytes
from voicecli_endpoint.chunking import ChunkPolicy
from voicecli_endpoint.connections import BODY_TIMEOUT_S
from voicecli_endpoint.engines.base import Audio
from voicecli_endpoint.scheduler import Batching, CancelToken, FairScheduler, JobDropped
from voicecli_endpoint.session import WebSocketSession
from voicecli_endpoint.sizing import BATCH_WINDOW_MS, Parallelism
from voicecli_endpoint.synthesis import Synthesizer
from voicecli_endpoint.validation import (
    accept_requests_stream,
    parse_invocation,
    parse_openai_speech,
    shown,
    shown_error,
)

log = logging.getLogger(__name__)


def default_models_dir() -> Path:
    """The models directory voicecli installs into (imported lazily: the container has no platformdirs need)."""
    from voicecli.paths import default_models_dir as voicecli_models_dir

    return voicecli_models_dir()


@dataclass(frozen=True)
class ServerSettings:
    """Everything the app needs to know: the server's options as it acts on them (`from_options`), plus what no
    command line sets (encoder bitrate, warm-up voice, chunking). Not voicecli.config's [endpoint] section: that is
    the client's choice of an endpoint; this is one server's running configuration."""

    engine: str = "auto"
    models_dir: Path | None = None
    workers: int | None = None
    """Parallel inference workers; None: `auto` (see voicecli_endpoint.sizing)."""
    threads: int | None = None
    """Intra-op threads per inference; None: `auto`."""
    max_batch: int | None = None
    """Pieces per engine call; None: `auto` (batching on for the torch engine on a GPU; voicecli_endpoint.sizing)."""
    batch_window_ms: float = BATCH_WINDOW_MS
    """How long a short batch waits for more pieces."""
    limits: Limits = field(default_factory=Limits)
    mp3_kbps: int = DEFAULT_MP3_KBPS
    warmup_voice: str = DEFAULTS.voice
    chunk_policy: ChunkPolicy = field(default_factory=ChunkPolicy)
    token: str = field(default="", repr=False)
    """Bearer token required on POST and the WebSocket ("" for none). repr=False: settings get logged."""
    host: str = DEFAULT_HOST
    """The address the server is bound to (serve's --host): without a token, the Host check accepts it besides the
    loopback names, and a wildcard bind (0.0.0.0) turns the check off (access.host_allowed says why)."""

    @classmethod
    def from_options(cls, options: ServerOptions) -> ServerSettings:
        """The settings a server started with `options` runs with: its limits gathered, its token read from the
        environment when the options leave it to that (None); port and logging are the server's, not the app's."""
        limits = Limits(max_text_chars=options.max_text_chars, max_queued_requests=options.max_queued_requests,
                        max_sessions=options.max_sessions, idle_timeout_s=options.idle_timeout_s)
        token = token_from_environment() if options.token is None else options.token.strip()
        return cls(engine=options.engine, models_dir=options.models_dir, workers=options.workers,
                   threads=options.threads, max_batch=options.max_batch, batch_window_ms=options.batch_window_ms,
                   limits=limits, token=token, host=options.host)


@dataclass
class EndpointState:
    """Readiness and the loaded model, shared by all routes through app.state.endpoint."""

    settings: ServerSettings
    scheduler: FairScheduler = field(default_factory=FairScheduler)
    synthesizer: Synthesizer | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    admission: Admission = field(init=False)
    load_error: str | None = None
    started: float = field(default_factory=time.time)
    load_s: float | None = None
    parallelism: Parallelism | None = None
    max_batch: int | None = None
    """Pieces per engine call once loaded (1: no batching)."""
    warmup_s: float | None = None
    http_requests: int = 0
    http_abandoned: int = 0
    """POSTs whose client went away before the answer was ready (their synthesis was stopped)."""
    refused_unauthorized: int = 0
    refused_origin: int = 0
    refused_host: int = 0
    """Requests refused because their Host named neither this machine nor the bound address (access.host_allowed)."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.admission = Admission(self.settings.limits.max_sessions)

    async def load(self) -> None:
        """Load G2P and the engine off the event loop, warm up, then mark ready (or record the failure)."""
        from voicecli_endpoint import sizing
        from voicecli_endpoint.engines.select import cuda_available, load_engine, resolve_engine_name
        from voicecli_endpoint.g2p import Phonemizer

        settings = self.settings
        models_dir = settings.models_dir or default_models_dir()
        started = time.perf_counter()
        try:
            resolved = await asyncio.to_thread(resolve_engine_name, settings.engine)
            gpu = resolved == "torch" and await asyncio.to_thread(cuda_available)
            self.parallelism = parallelism = sizing.choose(settings.workers, settings.threads, gpu=gpu)
            log.info("inference: %s", parallelism.describe())
            engine = await asyncio.to_thread(load_engine, resolved, models_dir, parallelism.threads,
                                             parallelism.solo_threads)
            self.max_batch = sizing.choose_batch(settings.max_batch, gpu=gpu, engine_batches=engine.batches)
            if settings.max_batch is not None and settings.max_batch > self.max_batch:
                log.warning("the %s engine does not batch: --max-batch %d ignored", engine.name, settings.max_batch)
            batching = (Batching(engine.synthesize_batch, self.max_batch, settings.batch_window_ms / 1000)
                        if self.max_batch > 1 else None)
            log.info("batching: %s", f"up to {self.max_batch} pieces within {settings.batch_window_ms:g} ms"
                     if batching else "off")
            self.scheduler = FairScheduler(parallelism.workers, batching=batching)
            phonemizer = await asyncio.to_thread(Phonemizer)
            synthesizer = Synthesizer(engine, phonemizer, self.scheduler, settings.chunk_policy)
            self.load_s = time.perf_counter() - started
            self.warmup_s = await synthesizer.warm_up(settings.warmup_voice)
        except Exception as exc:
            log.exception("loading the %s engine from %s failed", settings.engine, models_dir)
            self.load_error = f"{type(exc).__name__}: {exc}"
            self.ready.set()
            return
        self.synthesizer = synthesizer
        log.info("%s engine on %s ready: loaded in %.1f s, warm-up %.1f s, %d voices", engine.name, engine.device,
                 self.load_s, self.warmup_s, len(engine.voices))
        self.ready.set()

    def next_key(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"


def _parallelism_details(state: EndpointState) -> dict[str, Any]:
    """Engine and inference sizes, for /ping?details=1, /stats and every bench's machine record."""
    synth, sizes = state.synthesizer, state.parallelism
    return {
        "engine": None if synth is None else synth.engine.name,
        "device": None if synth is None else synth.engine.device,
        "workers": None if sizes is None else sizes.workers,
        "threads": None if sizes is None else sizes.threads,
        "solo_threads": None if sizes is None else (sizes.solo_threads or sizes.threads),
        "cpus": None if sizes is None else sizes.cpus,
        "workers_auto": None if sizes is None else sizes.workers_auto,
        "threads_auto": None if sizes is None else sizes.threads_auto,
        "max_batch": state.max_batch,
        "batch_window_ms": state.settings.batch_window_ms if (state.max_batch or 1) > 1 else None,
    }


def _state(app: Any) -> EndpointState:
    state: EndpointState = app.state.endpoint
    return state


def _error_response(code: ErrorCode, message: str, status: int,
                    headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"code": str(code), "message": message}, status_code=status, headers=headers)


@dataclass(frozen=True)
class Refusal:
    """A request refused on access grounds: the HTTP answer, and the reason a refused WebSocket handshake is logged
    and closed with (the client's header quoted short, never the token)."""

    response: JSONResponse
    reason: str


def _host_refusal(state: EndpointState, headers: Mapping[str, str]) -> Refusal | None:
    """The refusal of a request addressed to a name that is not this machine's (access.host_allowed), or None.

    Checked on every route, /ping and /stats included: they are what a DNS-rebinding page would read.
    """
    host = headers.get("host")
    if host_allowed(host, state.settings.token, state.settings.host):
        return None
    state.refused_host += 1
    return Refusal(forbidden_host_response(host or ""), f"forbidden_origin: the Host {shown(host)} is not a "
                                                         "loopback name or the bound address (no token)")


async def ping(request: Request) -> Response:
    state = _state(request.app)
    refusal = _host_refusal(state, request.headers)
    if refusal is not None:
        return refusal.response
    if state.load_error is not None:
        status, text = 500, f"model failed to load: {state.load_error}"
    elif state.synthesizer is None:
        status, text = 503, "loading"
    else:
        status, text = 200, "OK"
    if request.query_params.get("details") not in (None, "", "0", "false"):
        return JSONResponse({"status": text, **_parallelism_details(state)}, status_code=status)
    return PlainTextResponse(text, status_code=status)


async def stats(request: Request) -> Response:
    state = _state(request.app)
    refusal = _host_refusal(state, request.headers)
    if refusal is not None:
        return refusal.response
    synth = state.synthesizer
    scheduler = state.scheduler
    return JSONResponse({
        "ready": synth is not None,
        "load_error": state.load_error,
        **_parallelism_details(state),
        "voices": 0 if synth is None else len(synth.voices),
        "load_s": state.load_s,
        "warmup_s": state.warmup_s,
        "uptime_s": time.time() - state.started,
        "cpu_s": time.process_time(),
        "active_sessions": state.admission.sessions,
        "active_requests": state.admission.requests,
        "http_requests": state.http_requests,
        "http_abandoned": state.http_abandoned,
        "refused_unauthorized": state.refused_unauthorized,
        "refused_origin": state.refused_origin,
        "refused_host": state.refused_host,
        "refused_sessions": state.admission.refused_sessions,
        "refused_requests": state.admission.refused_requests,
        "pieces_synthesized": 0 if synth is None else synth.pieces_synthesized,
        "scheduler": {
            "jobs_run": scheduler.stats.jobs_run,
            "jobs_dropped": scheduler.stats.jobs_dropped,
            "queued": scheduler.queued,
            "sessions_waiting": scheduler.sessions_waiting,
            "busy_s": scheduler.stats.busy_s,
            "running": scheduler.running,
            "first_jobs_run": scheduler.stats.first_jobs_run,
            "batches_run": scheduler.stats.batches_run,
            "batched_jobs": scheduler.stats.batched_jobs,
        },
    })


async def _encode_whole(audio: Audio, fmt: str, mp3_kbps: int) -> bytes:
    if fmt == "wav":
        return await asyncio.to_thread(wav_bytes, audio)
    if fmt == "mp3":
        return await asyncio.to_thread(mp3_bytes, audio, mp3_kbps)
    return await asyncio.to_thread(to_pcm16, audio)


def _refusal(state: EndpointState, headers: Mapping[str, str]) -> Refusal | None:
    """The refusal of a POST or WebSocket handshake on access grounds (token, then Origin, then Host), or None."""
    settings = state.settings
    if not bearer_matches(headers.get("authorization"), settings.token):
        state.refused_unauthorized += 1
        return Refusal(unauthorized_response(), "unauthorized: bearer token required")
    origin = headers.get("origin")
    if not origin_allowed(origin, settings.token):
        state.refused_origin += 1
        return Refusal(forbidden_origin_response(origin or ""),
                       f"forbidden_origin: the web page at {shown(origin)} is not a loopback Origin (no token)")
    return _host_refusal(state, headers)


async def _read_body(request: Request, limit: int, timeout_s: float = BODY_TIMEOUT_S) -> bytes:
    """The request body, refused with frame_too_large as soon as it passes `limit` bytes, and TimeoutError when it
    has not all arrived within `timeout_s` (a total, so a body sent a byte at a time is cut too).

    Why while it streams in: a chunked body declares no length, and reading it whole first let one client push
    hundreds of megabytes into the server's memory before being told no.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ProtocolError(ErrorCode.FRAME_TOO_LARGE, f"body of {declared} bytes exceeds the limit of {limit}")
    body = bytearray()
    async with asyncio.timeout(timeout_s):
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ProtocolError(ErrorCode.FRAME_TOO_LARGE, f"body exceeds the limit of {limit} bytes")
    return bytes(body)


@contextlib.asynccontextmanager
async def _cancel_on_disconnect(receive: Receive, scheduler: FairScheduler, key: str,
                                token: CancelToken) -> AsyncIterator[None]:
    """While the block runs, a client that disconnects cancels `token` and frees its queued jobs at once.

    Call after the body was read: from then on the server's `receive` only ever reports the disconnect.
    """

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        token.cancel()
        scheduler.drop_cancelled(key)

    watcher = asyncio.create_task(watch(), name=f"{key}-disconnect")
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def _stream_body(state: EndpointState, synth: Synthesizer, key: str, inv: InvocationRequest,
                       receive: Receive) -> AsyncIterator[bytes]:
    encoder = stream_encoder(inv.format, http=True, mp3_kbps=state.settings.mp3_kbps)
    token = CancelToken()
    finished = False
    try:
        async with _cancel_on_disconnect(receive, state.scheduler, key, token):
            async for piece in synth.stream(key, inv.text, inv.voice, inv.speed, token):
                for data in await asyncio.to_thread(encoder.encode, piece.audio):
                    yield data
            for data in encoder.flush():
                yield data
        finished = True
    except JobDropped:  # our disconnect watcher cancelled the token (else Starlette cancels this generator)
        pass
    except Exception:  # the status line is sent: the body ends short (the client sees a cut stream), logged once
        log.exception("POST %s: synthesis failed after the answer had started; its body ends here", key)
    finally:
        token.cancel()
        state.scheduler.drop_session(key)
        if not finished:
            _abandoned(state, key)


def _abandoned(state: EndpointState, key: str) -> None:
    state.http_abandoned += 1
    log.info("POST %s: the client went away before the answer was complete; its synthesis was stopped", key)


class _HoldingSlot(Response):
    """Sends `inner`, then gives the request's admission slot back: a streamed answer holds its slot until its
    last byte, and the slot is freed even when the stream never started (client gone before the first byte)."""

    def __init__(self, inner: Response, release: Callable[[], None]) -> None:
        self.inner = inner
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.inner(scope, receive, send)
        finally:
            self.release()


BodyParser = Callable[..., InvocationRequest]
"""parse_invocation or parse_openai_speech: (body, *, voices, limits) -> InvocationRequest, or ProtocolError."""


async def invocations(request: Request) -> Response:
    return await _answer_post(request, parse_invocation)


async def openai_speech(request: Request) -> Response:
    """OpenAI's POST /v1/audio/speech: its body read into the request /invocations would make, answered alike."""
    return await _answer_post(request, parse_openai_speech)


async def _answer_post(request: Request, parse: BodyParser) -> Response:
    """Access checks, then the whole body, then a concurrency slot, then the answer.

    Why the body before the slot: a slot stands for synthesis work. Taken before the body was read, 32 sockets that
    declared a body and sent one byte of it turned every other POST and WebSocket away with 503 for as long as they
    stayed open.
    """
    state = _state(request.app)
    refusal = _refusal(state, request.headers)
    if refusal is not None:
        return refusal.response
    synth = state.synthesizer
    if synth is None:
        return _error_response(ErrorCode.NOT_READY, state.load_error or "the model is still loading", 503)
    limits = state.settings.limits
    try:
        body = await _read_body(request, limits.max_frame_bytes)
    except ProtocolError as exc:
        return _error_response(exc.code, exc.message, 413)
    except TimeoutError:
        log.info("POST %s: the body did not arrive within %g s; answered 408 and closed", request.url.path,
                 BODY_TIMEOUT_S)
        return _error_response(ErrorCode.IDLE_TIMEOUT, f"the request body did not arrive within {BODY_TIMEOUT_S:g} s",
                               408, headers={"Connection": "close"})
    except ClientDisconnect:
        log.info("POST %s: the client went away while sending its body", request.url.path)
        return Response(status_code=499)  # nobody reads it: the connection is gone
    admission = state.admission
    if not admission.try_enter("request"):
        log.warning("refused a POST: %d sessions and requests already being served (limit %d)", admission.in_use,
                    admission.limit)
        return too_many_sessions_response(admission.limit)
    try:
        response = await _invocation(request, state, synth, parse, body)
    except BaseException:
        admission.leave("request")
        raise
    return _HoldingSlot(response, lambda: admission.leave("request"))


async def _invocation(request: Request, state: EndpointState, synth: Synthesizer, parse: BodyParser,
                      body: bytes) -> Response:
    limits = state.settings.limits
    try:
        inv = parse(body, voices=synth.voices, limits=limits)
    except ProtocolError as exc:
        return _error_response(exc.code, exc.message, 413 if exc.code == ErrorCode.FRAME_TOO_LARGE else 400)
    except Exception:  # a bug in validation: a typed answer, never a bare 500 page
        log.exception("POST %s: validating the body failed", request.url.path)
        return _error_response(ErrorCode.INTERNAL_ERROR, "the server failed to read this request (a bug, logged "
                               "on the server)", 500)
    state.http_requests += 1
    key = state.next_key("http")
    media_type = CONTENT_TYPES[inv.format]
    if inv.stream or accept_requests_stream(request.headers.get("accept")):
        return StreamingResponse(_stream_body(state, synth, key, inv, request.receive), media_type=media_type,
                                 headers={"X-Sample-Rate": str(SAMPLE_RATE)})
    started = time.perf_counter()
    pieces: list[Audio] = []
    synthesis_s = queue_s = 0.0
    token = CancelToken()
    try:
        async with _cancel_on_disconnect(request.receive, state.scheduler, key, token):
            async for piece in synth.stream(key, inv.text, inv.voice, inv.speed, token):
                pieces.append(piece.audio)
                synthesis_s += piece.synthesis_s
                queue_s += piece.queue_wait_s
    except JobDropped:
        _abandoned(state, key)
        return Response(status_code=499)  # nobody reads it: the connection is gone
    except Exception as exc:
        log.exception("POST %s: synthesis failed", request.url.path)
        return _error_response(ErrorCode.SYNTHESIS_FAILED, f"synthesis failed: {shown_error(exc)}", 500)
    finally:
        token.cancel()
        state.scheduler.drop_session(key)
    audio: Audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
    data = await _encode_whole(audio, inv.format, state.settings.mp3_kbps)
    audio_s = len(audio) / SAMPLE_RATE
    headers = {
        **timing_headers(Timings(queue_s * 1000, synthesis_s * 1000, 0.0, audio_s)),
        "X-Elapsed-Ms": f"{(time.perf_counter() - started) * 1000:.1f}",
        "X-Sample-Rate": str(SAMPLE_RATE),
    }
    return Response(data, media_type=media_type, headers=headers)


async def _refuse_handshake(websocket: WebSocket, response: JSONResponse, close_code: int, reason: str) -> None:
    """Refuse before accepting: an HTTP response where the server supports it, else a close with a reason."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:
        await websocket.accept()
        await websocket.close(code=close_code, reason=reason[:120])


async def bidirectional_stream(websocket: WebSocket) -> None:
    state = _state(websocket.app)
    settings = state.settings
    refusal = _refusal(state, websocket.headers)
    if refusal is not None:
        level = logging.INFO if refusal.response.status_code == 401 else logging.WARNING
        log.log(level, "refused a WebSocket handshake: %s", refusal.reason)
        await _refuse_handshake(websocket, refusal.response, 1008, refusal.reason)
        return
    admission = state.admission
    if not admission.try_enter("session"):  # before the first await: concurrent handshakes cannot overshoot
        log.warning("refused a WebSocket session: %d sessions and requests already being served (limit %d)",
                    admission.in_use, admission.limit)
        await _refuse_handshake(websocket, too_many_sessions_response(admission.limit), 1013,
                                f"too_many_sessions: {admission.limit} already being served; try again later")
        return
    try:
        await websocket.accept()
        await state.ready.wait()
        synth = state.synthesizer
        if synth is None:
            error = Error(str(ErrorCode.NOT_READY), f"model failed to load: {state.load_error}")
            with contextlib.suppress(Exception):
                await websocket.send_text(encode_message(error))
                await websocket.close(code=1011)
            return
        session = WebSocketSession(websocket, synth, limits=settings.limits, mp3_kbps=settings.mp3_kbps)
        await session.run()
    finally:
        admission.leave("session")


ROUTES: list[BaseRoute] = [
    Route(PING_PATH, ping, methods=["GET"]),
    Route(INVOCATIONS_PATH, invocations, methods=["POST"]),
    Route(OPENAI_SPEECH_PATH, openai_speech, methods=["POST"]),
    WebSocketRoute(WS_PATH, bidirectional_stream),
    Route(STATS_PATH, stats, methods=["GET"]),
]


def create_app(settings: ServerSettings) -> Starlette:
    """The endpoint app; its model loads in the background once the app starts (the lifespan)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state = EndpointState(settings)
        app.state.endpoint = state
        loader = asyncio.create_task(state.load(), name="model-loader")
        try:
            yield
        finally:
            loader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loader
            await state.scheduler.close()

    return Starlette(routes=ROUTES, lifespan=lifespan)
