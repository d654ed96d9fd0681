"""Measure time to first audio, in-process and over the WebSocket, so the transport's share is visible.

    .venv/bin/python -m tests.endpoint.measure_latency [--threads 2] [--reps 3] [--models-dir DIR]

In-process: the server's own code path (G2P, chunking, fair scheduler, engine) without any transport.
Over the WebSocket: a real `python -m voicecli_endpoint` process on loopback and the `websockets` client; first
audio is the first binary frame received. Reports real-time factor (synthesis time / audio time) and peak RSS.
Numbers depend heavily on what else the machine is doing: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

TEXTS = {
    3: "Thanks for asking.",
    6: "I think that sounds like fun.",
    12: "The quick brown fox jumps over the lazy dog near the river.",
}


@dataclass
class Sample:
    words: int
    where: str
    first_audio_ms: float
    total_ms: float
    audio_s: float
    server_first_audio_ms: float | None = None

    @property
    def rtf(self) -> float:
        return self.total_ms / 1000 / self.audio_s if self.audio_s else float("nan")


async def _in_process(models_dir: Path, threads: int, reps: int) -> tuple[list[Sample], float, float]:
    from voicecli_endpoint.engines.onnx_engine import OnnxEngine
    from voicecli_endpoint.g2p import Phonemizer
    from voicecli_endpoint.scheduler import FairScheduler
    from voicecli_endpoint.synthesis import Synthesizer

    started = time.perf_counter()
    synth = Synthesizer(OnnxEngine(models_dir, threads), Phonemizer(), FairScheduler())
    load_s = time.perf_counter() - started
    await synth.warm_up("af_heart")
    samples: list[Sample] = []
    for _ in range(reps):
        for words, text in TEXTS.items():
            t0 = time.perf_counter()
            first: float | None = None
            audio_samples = 0
            async for piece in synth.stream("bench", text, "af_heart", 1.0):
                if first is None:
                    first = time.perf_counter() - t0
                audio_samples += len(piece.audio)
            total = time.perf_counter() - t0
            samples.append(Sample(words, "in-process", (first or total) * 1000, total * 1000, audio_samples / 24_000))
    await synth.scheduler.close()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return samples, load_s, peak_mb


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _over_websocket(models_dir: Path, threads: int, reps: int) -> tuple[list[Sample], float, float]:
    import httpx
    from websockets.asyncio.client import connect

    port = _free_port()
    command = [sys.executable, "-m", "voicecli_endpoint", "--port", str(port), "--engine", "onnx",
               "--threads", str(threads), "--models-dir", str(models_dir), "--log-level", "warning"]
    started = time.perf_counter()
    process = subprocess.Popen(command)
    try:
        async with httpx.AsyncClient() as client:
            while True:
                try:
                    if (await client.get(f"http://127.0.0.1:{port}/ping")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if process.poll() is not None:
                    raise RuntimeError("endpoint exited during start-up")
                await asyncio.sleep(0.2)
        ready_s = time.perf_counter() - started
        samples: list[Sample] = []
        async with connect(f"ws://127.0.0.1:{port}/invocations-bidirectional-stream") as ws:
            for rep in range(reps):
                for words, text in TEXTS.items():
                    t0 = time.perf_counter()
                    await ws.send(json.dumps({"text": text, "voice": "af_heart", "speed": 1.0,
                                              "request_id": f"{rep}-{words}"}))
                    first: float | None = None
                    while True:
                        data = await ws.recv()
                        if isinstance(data, bytes):
                            if first is None:
                                first = time.perf_counter() - t0
                            continue
                        message = json.loads(data)
                        if message["type"] == "synthesis_complete":
                            break
                    total = time.perf_counter() - t0
                    timings = message["timings"]
                    samples.append(Sample(words, "websocket", (first or total) * 1000, total * 1000,
                                          timings["audio_s"], timings["first_audio_ms"]))
        return samples, ready_s, _peak_rss_mb(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _report(samples: list[Sample]) -> None:
    print(f"{'where':<11} {'words':>5} {'first audio ms (median, min)':>30} {'server-side ms':>15} "
          f"{'transport ms':>13} {'RTF':>6}")
    for where in ("in-process", "websocket"):
        for words in TEXTS:
            group = [s for s in samples if s.where == where and s.words == words]
            if not group:
                continue
            first = [s.first_audio_ms for s in group]
            server = [s.server_first_audio_ms for s in group if s.server_first_audio_ms is not None]
            server_txt = f"{statistics.median(server):.0f}" if server else "-"
            transport = (f"{statistics.median([s.first_audio_ms - (s.server_first_audio_ms or 0) for s in group]):.1f}"
                         if server else "-")
            print(f"{where:<11} {words:>5} {statistics.median(first):>22.0f} ({min(first):>5.0f}) {server_txt:>15} "
                  f"{transport:>13} {statistics.median(s.rtf for s in group):>6.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.endpoint.measure_latency")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--models-dir", type=Path,
                        default=Path(os.environ.get("VOICECLI_MODELS_DIR",
                                                    Path.home() / ".local/share/voicecli/models")))
    parser.add_argument("--json", type=Path, help="also write every sample here")
    args = parser.parse_args(argv)
    print(f"onnx engine, {args.threads} threads, {args.reps} reps, load average before: {os.getloadavg()}")
    local, load_s, local_peak = asyncio.run(_in_process(args.models_dir, args.threads, args.reps))
    print(f"in-process: load {load_s:.1f} s, peak RSS {local_peak:.0f} MB")
    remote, ready_s, remote_peak = asyncio.run(_over_websocket(args.models_dir, args.threads, args.reps))
    print(f"server: ready (/ping 200) after {ready_s:.1f} s, peak RSS {remote_peak:.0f} MB")
    _report(local + remote)
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps([asdict(s) | {"rtf": s.rtf} for s in local + remote], indent=1))


if __name__ == "__main__":
    main()
