"""A SageMaker Runtime stand-in for InvokeEndpoint and InvokeEndpointWithResponseStream (test equipment).

HTTP/1.1 on 127.0.0.1, forwarding to a REAL container's POST /invocations, the way SageMaker does: the body passes
through untouched, a container error becomes a 424 ModelError, the response stream becomes an event stream of
PayloadPart events. To exercise the client's re-alignment, every container chunk is cut into PayloadParts at odd
byte offsets (1, 3, 7, ... bytes), so parts end mid-MP3-frame and mid-sample, as AWS allows.

Scripted faults per endpoint name (`Behaviour`): a ModelStreamError or InternalStreamFailure after N parts (after
HTTP 200, as AWS can), throttling. An unknown endpoint name gets AWS's ValidationError "... not found".
"""

from __future__ import annotations

import http.client
import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.standins.eventstream import encode_message
from tests.standins.loopback import LoopbackServer, end_chunks, write_chunk

ACCOUNT = "123456789012"
VARIANT = "primary"
PART_SIZES = (1, 3, 7, 333, 1021, 5, 4099)
"""Sizes PayloadParts are cut to, cycled: odd, so MP3 frames and 16-bit samples are split everywhere."""

_PATH = re.compile(r"^/endpoints/(?P<name>[^/]+)/(?P<op>invocations|invocations-response-stream)$")


@dataclass
class Behaviour:
    """What one endpoint name does besides forwarding."""

    stream_fault_after_parts: int | None = None
    stream_fault_type: str = "ModelStreamError"
    stream_fault_message: str = "Model container failed while streaming (stand-in fault)."
    throttle: bool = False


@dataclass
class Record:
    """One request the stand-in served, for assertions and the hop-cost measurement."""

    endpoint: str
    operation: str
    headers: dict[str, str]
    body: bytes
    status: int = 0
    parts: int = 0
    received_at: float = 0.0
    first_byte_from_container_at: float | None = None
    first_part_sent_at: float | None = None


@dataclass
class SageMakerRuntimeStandIn:
    """Serve `endpoints` (name -> behaviour) backed by the container at `container_url`."""

    container_url: str
    endpoints: dict[str, Behaviour] = field(default_factory=lambda: {"kokoro": Behaviour()})
    records: list[Record] = field(default_factory=list)
    _server: LoopbackServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None
        return self._server.url

    def start(self) -> SageMakerRuntimeStandIn:
        standin = self

        class Handler(_Handler):
            owner = standin

        self._server = LoopbackServer(Handler).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()

    def record(self, record: Record) -> None:
        with self._lock:
            self.records.append(record)

    def __enter__(self) -> SageMakerRuntimeStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    owner: SageMakerRuntimeStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        received = time.monotonic()
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        match = _PATH.match(urlsplit(self.path).path)
        if match is None:
            self._aws_error(404, "UnknownOperationException", f"no operation at {self.path}")
            return
        name, operation = unquote(match["name"]), match["op"]
        record = Record(name, operation, {k.lower(): v for k, v in self.headers.items()}, body, received_at=received)
        self.owner.record(record)
        if not self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256 Credential="):
            self._aws_error(403, "MissingAuthenticationTokenException", "Missing Authentication Token", record)
            return
        behaviour = self.owner.endpoints.get(name)
        if behaviour is None:
            self._aws_error(400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.", record)
            return
        if behaviour.throttle:
            self._aws_error(429, "ThrottlingException", "Rate exceeded", record)
            return
        if operation == "invocations":
            self._invoke(body, record)
        else:
            self._invoke_stream(body, record, behaviour)

    # ------------------------------------------------------------------------------------------------ helpers

    def _aws_error(self, status: int, code: str, message: str, record: Record | None = None,
                   extra: dict[str, Any] | None = None) -> None:
        payload = json.dumps({"Message": message, **(extra or {})}).encode()
        self.send_response(status)
        self.send_header("x-amzn-ErrorType", f"{code}:http://internal.amazon.com/coral/com.amazon.sagemaker/")
        self.send_header("x-amzn-RequestId", "standin-0000")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        if record is not None:
            record.status = status

    def _container(self, body: bytes, content_type: str) -> tuple[http.client.HTTPConnection, Any]:
        target = urlsplit(self.owner.container_url)
        conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port or 80, timeout=60)
        conn.request("POST", "/invocations", body=body, headers={"Content-Type": content_type})
        return conn, conn.getresponse()

    def _model_error(self, status: int, text: str, record: Record) -> None:
        """SageMaker's answer when the container said 4xx/5xx: 424 ModelError carrying the original."""
        self._aws_error(
            424, "ModelError",
            f"Received client error ({status}) from {VARIANT} with message \"{text}\". See "
            f"https://us-east-1.console.aws.amazon.com/cloudwatch/home for more information.",
            record,
            {"OriginalStatusCode": status, "OriginalMessage": text,
             "LogStreamArn": f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/{record.endpoint}"},
        )

    def _invoke(self, body: bytes, record: Record) -> None:
        conn, response = self._container(body, self.headers.get("Content-Type", "application/json"))
        try:
            data = response.read()
        finally:
            conn.close()
        record.first_byte_from_container_at = time.monotonic()
        if response.status != 200:
            self._model_error(response.status, data.decode("utf-8", "replace"), record)
            return
        self.send_response(200)
        self.send_header("Content-Type", response.getheader("Content-Type", "application/octet-stream"))
        self.send_header("x-Amzn-Invoked-Production-Variant", VARIANT)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        record.status = 200
        record.first_part_sent_at = time.monotonic()

    def _invoke_stream(self, body: bytes, record: Record, behaviour: Behaviour) -> None:
        conn, response = self._container(body, self.headers.get("Content-Type", "application/json"))
        try:
            if response.status != 200:
                self._model_error(response.status, response.read().decode("utf-8", "replace"), record)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.amazon.eventstream")
            self.send_header("X-Amzn-SageMaker-Content-Type", response.getheader("Content-Type", ""))
            self.send_header("x-Amzn-Invoked-Production-Variant", VARIANT)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            record.status = 200
            sizes = itertools.cycle(PART_SIZES)
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                if record.first_byte_from_container_at is None:
                    record.first_byte_from_container_at = time.monotonic()
                while chunk:
                    size = next(sizes)
                    part, chunk = chunk[:size], chunk[size:]
                    if behaviour.stream_fault_after_parts is not None and \
                            record.parts >= behaviour.stream_fault_after_parts:
                        write_chunk(self, _fault(behaviour))
                        end_chunks(self)
                        return
                    write_chunk(self, _payload_part(part))
                    record.parts += 1
                    if record.first_part_sent_at is None:
                        record.first_part_sent_at = time.monotonic()
            end_chunks(self)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up (a cancel): SageMaker stops relaying too
        finally:
            conn.close()


def _payload_part(data: bytes) -> bytes:
    headers = {":message-type": "event", ":event-type": "PayloadPart", ":content-type": "application/octet-stream"}
    return encode_message(headers, data)


def _fault(behaviour: Behaviour) -> bytes:
    headers = {":message-type": "exception", ":exception-type": behaviour.stream_fault_type,
               ":content-type": "application/json"}
    body: dict[str, str] = {"Message": behaviour.stream_fault_message}
    if behaviour.stream_fault_type == "ModelStreamError":
        body["ErrorCode"] = "ModelStreamError"
    return encode_message(headers, json.dumps(body).encode())
