"""A SageMaker InvokeEndpointWithBidirectionalStream stand-in: HTTP/2 over TLS on 127.0.0.1 (test equipment).

It does what SageMaker does between the HTTP/2 SDK and a container: for each POST
/endpoints/{name}/invocations-bidirectional-stream it opens ONE WebSocket to the real container's
/invocations-bidirectional-stream, answers 200 at once, then bridges:

- each client event (a SIGNED ENVELOPE: outer headers :date and :chunk-signature around an inner PayloadPart
  message) -> one container frame, BINARY unless the part's DataType is UTF8. The envelope structure is checked
  and, when the stand-in knows the secret key, every chunk signature is verified along the SigV4 chain, so the
  real SDK's signing is exercised, not just its framing;
- each container frame -> one PayloadPart event (DataType UTF8 for text frames, BINARY otherwise);
- container WebSocket close -> end of the HTTP/2 stream; the client ending its half (END_STREAM) -> the
  container WebSocket is closed at once, which is how SageMaker tears a session down when a client closes its
  input too early.

Scripted per endpoint name (`BidiBehaviour`): refuse with an HTTP error (e.g. 400 InputValidationError), or send a
ModelStreamError exception event after N PayloadParts. An unknown name gets 400 ValidationError "not found".

Runs its own event loop in a daemon thread (so it never shares the client's loop), sets TCP_QUICKACK before every
read (CRT does not set TCP_NODELAY; without it Nagle and delayed ACKs stall messages ~40-90 ms on loopback), and
stops by itself after `lifetime_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import hmac
import json
import re
import socket
import struct
import threading
import time
from binascii import hexlify
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from botocore.eventstream import EventStreamBuffer
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.standins.eventstream import encode_message
from tests.standins.tls import SelfSigned

ACCOUNT = "123456789012"
VARIANT = "primary"
_PATH = re.compile(r"^/endpoints/(?P<name>[^/?]+)/invocations-bidirectional-stream\??$")
_TIMESTAMP = 8


@dataclass
class BidiBehaviour:
    """What one endpoint name does besides bridging."""

    reject: tuple[int, str, str] | None = None
    """(HTTP status, x-amzn-errortype, message): refuse the stream instead of opening it."""
    model_stream_error_after_parts: int | None = None
    """Send a ModelStreamError exception event after this many PayloadParts to the client."""


@dataclass
class BidiRecord:
    """One bidi stream as the stand-in saw it."""

    endpoint: str
    headers: dict[str, str]
    status: int = 0
    envelopes: int = 0
    signatures_verified: int = 0
    final_envelope: bool = False
    parts_in: list[tuple[str | None, bytes]] = field(default_factory=list)
    """(DataType, bytes) of every PayloadPart the client sent."""
    frames_out: int = 0
    parts_in_at: list[float] = field(default_factory=list)
    """time.monotonic() when each client PayloadPart was decoded (for measuring the hop's cost)."""
    frames_out_at: list[tuple[float, bool]] = field(default_factory=list)
    """(time.monotonic(), is_text) when each container frame arrived at the stand-in."""
    violations: list[str] = field(default_factory=list)
    client_ended: bool = False
    container_closed: bool = False


class _SignatureChain:
    """Verifies SigV4 event signatures: each one signs the previous, seeded by the request's own signature."""

    def __init__(self, authorization: str, amz_date: str, secret_key: str) -> None:
        credential = re.search(r"Credential=[^/]+/(\d{8})/([^/]+)/([^/]+)/aws4_request", authorization)
        signature = re.search(r"Signature=([0-9a-f]{64})", authorization)
        if credential is None or signature is None:
            raise ValueError(f"unreadable Authorization header {authorization!r}")
        self.day, self.region, self.service = credential.groups()
        self.prior = signature.group(1).encode()
        self.amz_date = amz_date
        self.secret = secret_key

    def _key(self, day: str) -> bytes:
        key = ("AWS4" + self.secret).encode()
        for part in (day, self.region, self.service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        return key

    def verify(self, date_ms: int, payload: bytes, signature: bytes) -> bool:
        encoded = struct.pack(">B", 5) + b":date" + struct.pack(">Bq", _TIMESTAMP, date_ms)
        event_time = datetime.datetime.fromtimestamp(date_ms / 1000, datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        for timestamp in dict.fromkeys((event_time, self.amz_date)):
            scope = f"{timestamp[:8]}/{self.region}/{self.service}/aws4_request"
            to_sign = "\n".join(("AWS4-HMAC-SHA256-PAYLOAD", timestamp, scope, self.prior.decode(),
                                 hashlib.sha256(encoded).hexdigest(), hashlib.sha256(payload).hexdigest()))
            expected = hmac.new(self._key(timestamp[:8]), to_sign.encode(), hashlib.sha256).digest()
            if hmac.compare_digest(expected, signature):
                self.prior = hexlify(signature)
                return True
        return False


class BidiStandIn:
    """The stand-in server. `url` is what the SDK's endpoint_uri should be; trust `tls.cert` via SSL_CERT_FILE."""

    def __init__(
        self,
        container_url: str,
        tls: SelfSigned,
        *,
        endpoints: dict[str, BidiBehaviour] | None = None,
        secret_key: str | None = None,
        lifetime_s: float = 900.0,
    ) -> None:
        self.container_ws = container_url.replace("http://", "ws://").rstrip("/") + "/invocations-bidirectional-stream"
        self.tls = tls
        self.endpoints = endpoints if endpoints is not None else {"kokoro": BidiBehaviour()}
        self.secret_key = secret_key
        self.lifetime_s = lifetime_s
        self.records: list[BidiRecord] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bidi-standin", daemon=True)
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> BidiStandIn:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the bidi stand-in did not start")
        if self._error is not None:
            raise RuntimeError("the bidi stand-in failed to start") from self._error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self) -> BidiStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            self._connection, "127.0.0.1", 0, ssl=self.tls.server_context(["h2"])
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.lifetime_s)
            server.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _Connection(self, reader, writer).serve()


class _Connection:
    """One HTTP/2 connection; all h2 state is touched only from the stand-in's loop."""

    def __init__(self, owner: BidiStandIn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.owner = owner
        self.reader = reader
        self.writer = writer
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.streams: dict[int, _Stream] = {}
        self.window = asyncio.Event()
        self.sock: Any = writer.get_extra_info("socket")

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)

    def quickack(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)

    async def serve(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.h2.initiate_connection()
        self.flush()
        try:
            while True:
                self.quickack()
                data = await self.reader.read(65536)
                if not data:
                    break
                try:
                    events = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError:
                    self.flush()
                    break
                for event in events:
                    self._dispatch(event)
                self.flush()
                await self.writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            for stream in self.streams.values():
                stream.abort()
            with contextlib.suppress(Exception):
                self.writer.close()

    def _dispatch(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            stream = _Stream(self, event.stream_id, {str(k): str(v) for k, v in event.headers or []})
            self.streams[event.stream_id] = stream
            stream.task = asyncio.create_task(stream.run())
        elif isinstance(event, h2.events.DataReceived):
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if event.stream_id in self.streams:
                self.streams[event.stream_id].feed(event.data or b"")
        elif isinstance(event, h2.events.StreamEnded):
            if event.stream_id in self.streams:
                self.streams[event.stream_id].client_end()
        elif isinstance(event, h2.events.StreamReset):
            if event.stream_id in self.streams:
                self.streams[event.stream_id].abort()
        elif isinstance(event, h2.events.WindowUpdated):
            self.window.set()

    async def send_data(self, stream_id: int, data: bytes) -> None:
        """Write `data` on the stream, respecting flow control (a frame can span several DATA frames)."""
        while data:
            try:
                window = self.h2.local_flow_control_window(stream_id)
            except h2.exceptions.StreamClosedError:
                return
            size = min(window, self.h2.max_outbound_frame_size, len(data))
            if size <= 0:
                self.window.clear()
                await self.window.wait()
                continue
            self.h2.send_data(stream_id, data[:size])
            data = data[size:]
            self.flush()
        await self.writer.drain()

    def end(self, stream_id: int) -> None:
        with contextlib.suppress(h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            self.h2.end_stream(stream_id)
        self.flush()


class _Stream:
    """One bidi invocation: its envelope decoder, its container WebSocket, and the two pumps between them."""

    def __init__(self, conn: _Connection, stream_id: int, headers: dict[str, str]) -> None:
        self.conn = conn
        self.id = stream_id
        self.headers = headers
        self.inbound: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self.decoder = EventStreamBuffer()
        self.task: asyncio.Task[None] | None = None
        self.ws: ClientConnection | None = None
        path = headers.get(":path", "")
        match = _PATH.match(path)
        self.record = BidiRecord(unquote(match["name"]) if match else path, headers)
        conn.owner.records.append(self.record)
        self.chain: _SignatureChain | None = None
        secret = conn.owner.secret_key
        if secret is not None:
            try:
                self.chain = _SignatureChain(headers.get("authorization", ""), headers.get("x-amz-date", ""), secret)
            except ValueError as exc:
                self.record.violations.append(str(exc))

    # ---------------------------------------------------------------------------------------------- checks

    def _check_request(self) -> str | None:
        h = self.headers
        if h.get(":method") != "POST":
            return f"method {h.get(':method')}"
        if not _PATH.match(h.get(":path", "")):
            return f"path {h.get(':path')}"
        if h.get("content-type") != "application/vnd.amazon.eventstream":
            return f"content-type {h.get('content-type')}"
        if h.get("x-amz-content-sha256") != "STREAMING-AWS4-HMAC-SHA256-EVENTS":
            return f"x-amz-content-sha256 {h.get('x-amz-content-sha256')}"
        if "/sagemaker/aws4_request" not in h.get("authorization", ""):
            return "authorization is not SigV4 for service sagemaker"
        return None

    def feed(self, data: bytes) -> None:
        """Decode signed envelopes as they arrive; forward each inner PayloadPart to the container."""
        self.decoder.add_data(data)
        try:
            for envelope in self.decoder:
                self._envelope(envelope.headers, envelope.payload)
        except Exception as exc:
            self.record.violations.append(f"undecodable event stream: {exc!r}")

    def _envelope(self, headers: dict[str, Any], payload: bytes) -> None:
        self.record.envelopes += 1
        if set(headers) != {":date", ":chunk-signature"}:
            self.record.violations.append(f"envelope headers {sorted(headers)}")
            return
        date, signature = headers[":date"], headers[":chunk-signature"]
        if not isinstance(date, int) or not isinstance(signature, bytes) or len(signature) != 32:
            self.record.violations.append("envelope :date is not a timestamp or :chunk-signature not 32 bytes")
            return
        if self.chain is not None:
            if self.chain.verify(date, payload, signature):
                self.record.signatures_verified += 1
            else:
                self.record.violations.append(f"bad chunk signature on envelope {self.record.envelopes}")
        if not payload:
            self.record.final_envelope = True
            return
        inner = EventStreamBuffer()
        inner.add_data(payload)
        messages = list(inner)
        if len(messages) != 1:
            self.record.violations.append(f"envelope holds {len(messages)} messages")
            return
        message = messages[0]
        kinds = (message.headers.get(":message-type"), message.headers.get(":event-type"))
        if kinds != ("event", "PayloadPart"):
            self.record.violations.append(f"inner message {kinds}")
            return
        data_type = message.headers.get("DataType")
        self.record.parts_in.append((data_type, bytes(message.payload)))
        self.record.parts_in_at.append(time.monotonic())
        payload = bytes(message.payload)
        self.inbound.put_nowait(payload.decode("utf-8") if data_type == "UTF8" else payload)

    def client_end(self) -> None:
        self.record.client_ended = True
        self.inbound.put_nowait(None)

    def abort(self) -> None:
        self.inbound.put_nowait(None)
        if self.task is not None and not self.task.done():
            self.task.cancel()

    # ---------------------------------------------------------------------------------------------- bridge

    def _respond(self, status: int, extra: list[tuple[str, str]]) -> None:
        self.record.status = status
        self.conn.h2.send_headers(self.id, [(":status", str(status)), *extra])
        self.conn.flush()

    async def _refuse(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"Message": message}).encode()
        self._respond(status, [("content-type", "application/json"), ("x-amzn-errortype", code),
                               ("x-amzn-requestid", "standin-bidi"), ("content-length", str(len(body)))])
        await self.conn.send_data(self.id, body)
        self.conn.end(self.id)

    async def run(self) -> None:
        problem = self._check_request()
        if problem is not None:
            self.record.violations.append(problem)
            await self._refuse(400, "ValidationError", f"stand-in rejected the request: {problem}")
            return
        behaviour = self.conn.owner.endpoints.get(self.record.endpoint)
        if behaviour is None:
            await self._refuse(400, "ValidationError",
                               f"Endpoint {self.record.endpoint} of account {ACCOUNT} not found.")
            return
        if behaviour.reject is not None:
            await self._refuse(*behaviour.reject)
            return
        try:
            self.ws = await connect(self.conn.owner.container_ws, max_size=None, open_timeout=10)
        except (OSError, TimeoutError) as exc:
            await self._refuse(424, "ModelError", f"could not reach the container: {exc}")
            return
        self._respond(200, [("content-type", "application/vnd.amazon.eventstream"),
                            ("x-amzn-invoked-production-variant", VARIANT),
                            ("x-amzn-requestid", "standin-bidi")])
        to_container = asyncio.create_task(self._to_container())
        try:
            await self._from_container(behaviour)
        finally:
            to_container.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await to_container
            with contextlib.suppress(Exception):
                await self.ws.close()
            self.conn.end(self.id)

    async def _to_container(self) -> None:
        assert self.ws is not None
        while True:
            frame = await self.inbound.get()
            if frame is None:  # the client closed its input: SageMaker ends the session
                await self.ws.close()
                return
            with contextlib.suppress(ConnectionClosed):
                await self.ws.send(frame)

    async def _from_container(self, behaviour: BidiBehaviour) -> None:
        assert self.ws is not None
        try:
            async for frame in self.ws:
                limit = behaviour.model_stream_error_after_parts
                if limit is not None and self.record.frames_out >= limit:
                    await self.conn.send_data(self.id, _model_stream_error())
                    return
                is_text = isinstance(frame, str)
                self.record.frames_out_at.append((time.monotonic(), is_text))
                data = frame.encode("utf-8") if isinstance(frame, str) else bytes(frame)
                await self.conn.send_data(self.id, _payload_part(data, "UTF8" if is_text else "BINARY"))
                self.record.frames_out += 1
        except ConnectionClosed:
            pass
        self.record.container_closed = True


def _payload_part(data: bytes, data_type: str) -> bytes:
    headers = {":message-type": "event", ":event-type": "PayloadPart",
               ":content-type": "application/octet-stream", "DataType": data_type}
    return encode_message(headers, data)


def _model_stream_error() -> bytes:
    headers = {":message-type": "exception", ":exception-type": "ModelStreamError",
               ":content-type": "application/json"}
    body = {"Message": "Model container failed while streaming (stand-in fault).", "ErrorCode": "ModelStreamError"}
    return encode_message(headers, json.dumps(body).encode())

