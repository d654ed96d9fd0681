"""Time to first audio byte: each SageMaker path (through the local stand-ins) vs the plain WebSocket, same text,
same run, interleaved round by round; plus the cost of the stand-in hop itself. Not a test (no timing asserts).

    .venv/bin/python -m tests.tts.measure_sagemaker [--rounds 5] [--models-dir DIR]

Starts its own endpoint process. The hop cost is measured on one clock (stand-ins run in this process): for the
stream path, client's first AudioChunk minus the stand-in's first byte from the container; for bidi, the client's
first AudioChunk minus the stand-in's receipt of the container's first audio frame, and the client's send() minus
the stand-in's decode of that PayloadPart (upstream).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.standins.sagemaker import SageMakerRuntimeStandIn
from tests.standins.sagemaker_bidi import BidiStandIn
from tests.standins.tls import make_self_signed
from voicecli.tts.base import AudioChunk, AudioDone, AudioFailed, SpeechRequest, TTSTransport
from voicecli.tts.sagemaker import (
    SageMakerBatchTransport,
    SageMakerBidiTransport,
    SageMakerStreamTransport,
    SageMakerTarget,
)
from voicecli.tts.websocket import WebSocketTransport

TEXT = "Hello! This is the first sentence of the answer, spoken right away."
SECRET = "measure-secret"


async def first_audio(transport: TTSTransport, rid: str, text: str) -> tuple[float, float]:
    """(seconds from send to the first AudioChunk, time.monotonic() of send); drains the request."""
    sent = time.monotonic()
    await transport.send(SpeechRequest(rid, text))
    first: float | None = None
    while True:
        event = await transport.next_event(300)
        if isinstance(event, AudioChunk) and first is None:
            first = event.at
        if isinstance(event, AudioFailed):
            raise RuntimeError(event.message)
        if isinstance(event, AudioDone) and event.request_id == rid:
            assert first is not None
            return first - sent, sent


def start_endpoint(models_dir: Path, port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "voicecli_endpoint", "--port", str(port), "--engine", "onnx", "--threads", "2",
               "--models-dir", str(models_dir)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    process.kill()
    raise RuntimeError("endpoint did not start")


def direct_stream_ttfb(url: str, text: str) -> float:
    started = time.monotonic()
    body = {"text": text, "format": "mp3", "stream": True}
    first: float | None = None
    with httpx.stream("POST", f"{url}/invocations", json=body, timeout=300) as response:
        for _ in response.iter_raw():  # read to the end: an abandoned synthesis would delay the next path
            first = first or time.monotonic() - started
    if first is None:
        raise RuntimeError("no bytes")
    return first


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models-dir", type=Path, default=Path(os.environ.get(
        "VOICECLI_MODELS_DIR", Path.home() / ".local/share/voicecli/models")))
    args = parser.parse_args()
    tls = make_self_signed(Path(tempfile.mkdtemp()))
    os.environ.update(AWS_ACCESS_KEY_ID="AKIDMEASURE000000000", AWS_SECRET_ACCESS_KEY=SECRET,
                      AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                      SSL_CERT_FILE=str(tls.cert))
    port = 18000 + os.getpid() % 1000
    process = start_endpoint(args.models_dir, port)
    url = f"http://127.0.0.1:{port}"
    results: dict[str, list[float]] = {k: [] for k in (
        "websocket", "http-stream direct", "sagemaker-bidi", "sagemaker-stream", "sagemaker-batch",
        "hop bidi down", "hop bidi up", "hop stream down")}
    try:
        with SageMakerRuntimeStandIn(url) as runtime, BidiStandIn(url, tls, secret_key=SECRET) as bidi:
            ws = WebSocketTransport(url)
            sm_bidi = SageMakerBidiTransport(SageMakerTarget("kokoro", "us-east-1", endpoint_url=bidi.url))
            sm_stream = SageMakerStreamTransport(SageMakerTarget("kokoro", "us-east-1", endpoint_url=runtime.url))
            sm_batch = SageMakerBatchTransport(SageMakerTarget("kokoro", "us-east-1", endpoint_url=runtime.url))
            connect_started = time.monotonic()
            await sm_bidi.connect()
            connect_ms = 1000 * (time.monotonic() - connect_started)
            print(f"bidi connect (credentials, TLS, HTTP/2, 200 headers): {connect_ms:.0f} ms")
            for plain in (ws, sm_stream, sm_batch):
                await plain.connect()
            transports: tuple[TTSTransport, ...] = (ws, sm_bidi, sm_stream, sm_batch)
            for transport in transports:  # warm every path once
                await first_audio(transport, f"warm-{transport.name}", "Warm up.")
            for round_ in range(args.rounds):
                results["websocket"].append((await first_audio(ws, f"ws{round_}", TEXT))[0])
                results["http-stream direct"].append(direct_stream_ttfb(url, TEXT))
                ttfa, sent = await first_audio(sm_bidi, f"bi{round_}", TEXT)
                results["sagemaker-bidi"].append(ttfa)
                record = bidi.records[-1]
                up = next(t for t in record.parts_in_at if t >= sent)
                down = next(t for t, is_text in record.frames_out_at if not is_text and t >= up)
                results["hop bidi up"].append(up - sent)
                results["hop bidi down"].append(sent + ttfa - down)
                ttfa, sent = await first_audio(sm_stream, f"st{round_}", TEXT)
                results["sagemaker-stream"].append(ttfa)
                stream_record = runtime.records[-1]
                assert stream_record.first_byte_from_container_at is not None
                results["hop stream down"].append(sent + ttfa - stream_record.first_byte_from_container_at)
                results["sagemaker-batch"].append((await first_audio(sm_batch, f"ba{round_}", TEXT))[0])
            for transport in transports:
                await transport.aclose()
    finally:
        process.terminate()
        process.wait(15)
    print(f"text: {TEXT!r}; {args.rounds} interleaved rounds; time to first audio byte (ms)")
    for name, values in results.items():
        ms = [1000 * v for v in values]
        print(f"  {name:20s} median {statistics.median(ms):8.1f}  min {min(ms):8.1f}  max {max(ms):8.1f}  "
              f"all {[round(v, 1) for v in ms]}")


if __name__ == "__main__":
    asyncio.run(main())
