"""Time to first audio byte and to first audio PLAYED, per transport, as `voicecli say --json` reports them: the real
command in a subprocess, playing into a private PulseAudio speaker, same text, all transports interleaved round by
round in ONE run. Not a test (no timing asserts); it prints numbers for the report.

    .venv/bin/python -m tests.tts.measure_say [--rounds 5] [--models-dir DIR]

Transports: WebSocket (bidi), batch HTTP, and SageMaker bidi / stream / batch through the local stand-ins
(tests/standins). The stand-in hop's added cost is SageMaker bidi minus plain WebSocket, paired per round (same
endpoint, same text, neighbouring runs). Every run's speaker recording is also checked against the endpoint's own
audio (normalised cross-correlation at 48 kHz), so a number never comes from a run that played the wrong thing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.commands.test_say import (
    ENDPOINT_NAME,
    SECRET,
    best_correlation,
    sagemaker_env,
    say,
    upsample_2x,
    wav_samples,
)
from tests.pulse import PrivatePulse
from tests.standins.sagemaker import Behaviour, SageMakerRuntimeStandIn
from tests.standins.sagemaker_bidi import BidiBehaviour, BidiStandIn
from tests.standins.tls import make_self_signed
from tests.tts.measure_sagemaker import start_endpoint

TEXT = "Hello! This is the first sentence of the answer, spoken right away."
FIELDS = ("first_audio_byte_ms", "first_audio_played_ms", "done_ms", "wall_ms", "correlation", "underruns",
          "hop_up_ms", "hop_down_ms")


def bidi_hop(bidi: BidiStandIn, report: dict[str, object]) -> tuple[float, float]:
    """The stand-in's own cost, on the machine-wide monotonic clock the say process reports its send time on.

    up: the stand-in decoded the client's PayloadPart, minus the client's send() returning (can be < 0: the
    stand-in may have it before send() returns); down: the client's first audio byte, minus the stand-in's receipt
    of the container's first audio frame.
    """
    record = bidi.records[-1]
    sent = report["sent_monotonic_s"]
    first_byte = report["first_audio_byte_ms"]
    assert isinstance(sent, float) and isinstance(first_byte, float)
    up = record.parts_in_at[0] - sent
    received = next(t for t, is_text in record.frames_out_at if not is_text)
    return 1000 * up, 1000 * (sent + first_byte / 1000 - received)


def median_line(name: str, values: list[float], digits: int = 1) -> str:
    return (f"  {name:18s} median {statistics.median(values):8.{digits}f}  min {min(values):8.{digits}f}  "
            f"max {max(values):8.{digits}f}  all {[round(v, digits) for v in values]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models-dir", type=Path, default=Path(os.environ.get(
        "VOICECLI_MODELS_DIR", Path.home() / ".local/share/voicecli/models")))
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="measure-say-"))
    tls = make_self_signed(home / "tls")
    port = 19000 + os.getpid() % 1000
    process = start_endpoint(args.models_dir, port)
    url = f"http://127.0.0.1:{port}"
    try:
        response = httpx.post(f"{url}/invocations", json={"text": TEXT, "format": "wav"}, timeout=300)
        response.raise_for_status()
        reference = upsample_2x(wav_samples(response.content)[2])
        with (PrivatePulse() as pulse,
              SageMakerRuntimeStandIn(url, {ENDPOINT_NAME: Behaviour()}) as runtime,
              BidiStandIn(url, tls, endpoints={ENDPOINT_NAME: BidiBehaviour()}, secret_key=SECRET) as bidi):
            paths: dict[str, Callable[[], tuple[list[str], dict[str, str]]]] = {
                "websocket": lambda: ([TEXT, "--endpoint", url, "--mode", "bidi", "--json"], {}),
                "batch": lambda: ([TEXT, "--endpoint", url, "--mode", "batch", "--json"], {}),
                "sagemaker-bidi": lambda: ([TEXT, "--json"], sagemaker_env("bidi", bidi.url, tls)),
                "sagemaker-stream": lambda: ([TEXT, "--json"], sagemaker_env("stream", runtime.url, tls)),
                "sagemaker-batch": lambda: ([TEXT, "--json"], sagemaker_env("batch", runtime.url, tls)),
            }
            results: dict[str, dict[str, list[float]]] = {name: {f: [] for f in FIELDS} for name in paths}
            for round_ in range(args.rounds + 1):  # round 0 warms every path and is not counted
                for name, make in paths.items():
                    argv, env = make()
                    started = time.monotonic()
                    run = say(argv, home, env, pulse)
                    wall_ms = 1000 * (time.monotonic() - started)
                    report = run.report
                    assert run.recorded is not None
                    correlation = best_correlation(run.recorded, reference)
                    if round_ == 0:
                        continue
                    row = results[name]
                    underruns = report["underruns"]
                    assert isinstance(underruns, int)
                    row["underruns"].append(float(underruns))
                    if name == "sagemaker-bidi":
                        hop_up, hop_down = bidi_hop(bidi, report)
                        row["hop_up_ms"].append(hop_up)
                        row["hop_down_ms"].append(hop_down)
                    for key in FIELDS[:3]:
                        value = report[key]
                        assert isinstance(value, float), (name, key, value)
                        row[key].append(value)
                    row["wall_ms"].append(wall_ms)
                    row["correlation"].append(correlation)
    finally:
        process.terminate()
        process.wait(15)
    print(f"text: {TEXT!r}; {args.rounds} interleaved rounds after one warm-up round; `voicecli say --json` in a "
          "subprocess, playing to a PulseAudio null sink")
    units = {"correlation": " (speaker recording vs the endpoint's WAV, 48 kHz)",
             "underruns": " (speaker ran dry mid-answer)", "wall_ms": " (ms, whole command: start-up, connect, "
             "speak, exit)", "hop_up_ms": " (ms, bidi stand-in: client send() -> stand-in decoded it)",
             "hop_down_ms": " (ms, bidi stand-in: container frame at stand-in -> client first byte)"}
    for field in FIELDS:
        print(f"{field}{units.get(field, ' (ms after request sent)')}")
        for name, row in results.items():
            if row[field]:
                print(median_line(name, row[field], 3 if field == "correlation" else 1))
    print("stand-in hop: sagemaker-bidi minus websocket, paired per round (ms)")
    for field in FIELDS[:3]:
        diffs = [b - w for b, w in zip(results["sagemaker-bidi"][field], results["websocket"][field], strict=True)]
        print(median_line(field, diffs))


if __name__ == "__main__":
    main()
