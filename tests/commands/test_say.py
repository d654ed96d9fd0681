"""`voicecli say` end to end: the real command in a subprocess, the real endpoint, every transport, and what
actually came out of the (virtual PulseAudio) speaker, compared with the endpoint's own audio for the same text.

The SageMaker paths go through the local stand-ins (tests/standins), so only the AWS wire is stood in for; the
audio is still synthesized by the session's real endpoint. A hostile endpoint (tests/tts/hostile.py) replays what a
broken or malicious one sends: the command must fail saying so, in bounded memory.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import os
import socket
import subprocess
import tempfile
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray

from tests.conftest import REPO, RunningServer
from tests.pulse import SINK_RATE, PrivatePulse
from tests.standins.sagemaker import Behaviour, SageMakerRuntimeStandIn
from tests.standins.sagemaker_bidi import BidiBehaviour, BidiStandIn
from tests.standins.tls import SelfSigned, make_self_signed
from tests.tts.hostile import HostileEndpoint, Script, Session, complete, honest, messages, start
from voicecli.bench.echo_path import find_pieces
from voicecli.commands.say import ANSWER_ID, MAX_KEPT_S, SayError, _SayAudio
from voicecli.tts.base import (
    MAX_MESSAGE_BYTES,
    MAX_REQUEST_AUDIO_S,
    AudioChunk,
    AudioDone,
    AudioStart,
    SpeechRequest,
)
from voicecli.tts.http_batch import BatchHttpTransport
from voicecli.tts.voices import ENGLISH_VOICES
from voicecli.wire.protocol import SAMPLE_RATE

TEXT = "Hello from the say command."
SECRET = "say-standin-secret"
ENDPOINT_NAME = "kokoro"
RUN_TIMEOUT_S = 240.0
MIN_CORRELATION = 0.95
TIMING_KEYS = ("request_sent", "first_audio_byte_ms", "first_audio_played_ms", "done_ms", "audio_seconds",
               "transport", "endpoint")

Audio = NDArray[np.float32]

PEAK_FILE = "SAY_TEST_PEAK_FILE"
MEASURED = f"""
import atexit, os, re, runpy, sys

def peak():  # VmHWM, this process's own peak since exec (rusage would add its parent's, inherited across exec)
    with open("/proc/self/status") as status, open(os.environ["{PEAK_FILE}"], "w") as out:
        out.write(re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1))

atexit.register(peak)
runpy.run_module("voicecli", run_name="__main__", alter_sys=True)
"""
"""`python -m voicecli`, which also writes its peak resident memory (kB) to the file named by ${PEAK_FILE} at exit."""


# ------------------------------------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class SayRun:
    returncode: int
    stdout: str
    stderr: str
    recorded: Audio | None = None
    peak_rss_mb: float = 0.0
    """The command's own peak resident memory (VmHWM): what an endpoint could make it take."""

    @property
    def report(self) -> dict[str, object]:
        assert self.returncode == 0, f"say failed ({self.returncode}):\n{self.stderr}"
        value = json.loads(self.stdout)
        assert isinstance(value, dict)
        return value

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("voicecli: error:")]


def say(args: list[str], home: Path, env: dict[str, str] | None = None, pulse: PrivatePulse | None = None) -> SayRun:
    """Run `python -m voicecli say ARGS` with a clean voicecli environment; record the speaker while it runs."""
    base = {name: value for name, value in os.environ.items()
            if not name.startswith(("VOICECLI_", "AWS_"))}  # no user setting or AWS profile can leak in
    base["XDG_CONFIG_HOME"] = str(home / "config")  # no user config file can leak in
    base["XDG_STATE_HOME"] = str(home / "state")
    if pulse is not None:
        base.update(pulse.env)
    base.update(env or {})
    command = [str(REPO / ".venv" / "bin" / "python"), "-c", MEASURED, "say", *args]
    recorder = pulse.record() if pulse is not None else None
    with tempfile.TemporaryDirectory() as scratch:
        base[PEAK_FILE] = peak = str(Path(scratch) / "peak")
        try:
            proc = subprocess.run(command, cwd=REPO, env=base, capture_output=True, text=True,
                                  timeout=RUN_TIMEOUT_S)
        finally:
            recorded = recorder.stop() if recorder is not None else None
        peak_kb = Path(peak).read_text() if Path(peak).exists() else "0"
    return SayRun(proc.returncode, proc.stdout, proc.stderr, recorded, int(peak_kb) / 1024)


def wav_samples(data: bytes) -> tuple[int, int, Audio]:
    """(rate, channels, float samples) of a 16-bit WAV."""
    with wave.open(io.BytesIO(data)) as wav:
        assert wav.getsampwidth() == 2
        pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
        return wav.getframerate(), wav.getnchannels(), (pcm.astype(np.float32) / 32768.0)


def upsample_2x(x: Audio) -> Audio:
    """Band-limited 24 kHz -> 48 kHz (zero-padding the spectrum), to compare with the 48 kHz sink."""
    spectrum = np.fft.rfft(x)
    padded = np.zeros(len(x) + 1, dtype=complex)
    padded[: len(spectrum)] = spectrum
    return (np.fft.irfft(padded, 2 * len(x)) * 2.0).astype(np.float32)


def best_correlation(recorded: Audio, reference: Audio) -> float:
    """Max over lags of the normalised cross-correlation of `reference` against windows of `recorded`."""
    n = len(reference)
    if len(recorded) < n:
        recorded = np.concatenate([recorded, np.zeros(n - len(recorded), np.float32)])
    size = 1 << int(np.ceil(np.log2(len(recorded) + n)))
    corr = np.fft.irfft(np.fft.rfft(recorded, size) * np.conj(np.fft.rfft(reference, size)), size)
    corr = corr[: len(recorded) - n + 1]
    energy = np.concatenate([[0.0], np.cumsum(recorded.astype(np.float64) ** 2)])
    window = energy[n:] - energy[:-n]
    ref_energy = float(np.sum(reference.astype(np.float64) ** 2))
    usable = window > 0.01 * ref_energy  # windows of near-silence say nothing
    if not usable.any():
        return 0.0
    ncc = corr[usable] / np.sqrt(window[usable] * ref_energy)
    return float(ncc.max())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def check_timings(report: dict[str, object], played: bool) -> None:
    assert [key for key in report if key in TIMING_KEYS] == list(TIMING_KEYS)  # all present, in this order
    assert report["request_sent"] == 0
    first_byte, done = report["first_audio_byte_ms"], report["done_ms"]
    assert isinstance(first_byte, float) and isinstance(done, float)
    assert 0 <= first_byte <= done
    played_ms = report["first_audio_played_ms"]
    if played:
        assert isinstance(played_ms, float)
        assert first_byte <= played_ms <= done
        assert isinstance(report["underruns"], int)
    else:
        assert played_ms is None and report["underruns"] is None
    audio_s = report["audio_seconds"]
    assert isinstance(audio_s, float) and 0.8 < audio_s < 5.0


# ------------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("say-home")


@pytest.fixture(scope="module")
def reference(server: RunningServer) -> Audio:
    """The endpoint's own audio for TEXT (POST /invocations, WAV): the truth every path is compared with."""
    response = httpx.post(f"{server.http_url}/invocations", json={"text": TEXT, "format": "wav"}, timeout=120)
    response.raise_for_status()
    rate, channels, samples = wav_samples(response.content)
    assert (rate, channels) == (SAMPLE_RATE, 1)
    return samples


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> SelfSigned:
    return make_self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def runtime(server: RunningServer) -> Iterator[SageMakerRuntimeStandIn]:
    with SageMakerRuntimeStandIn(server.http_url, {ENDPOINT_NAME: Behaviour()}) as standin:
        yield standin


@pytest.fixture(scope="module")
def bidi(server: RunningServer, tls: SelfSigned) -> Iterator[BidiStandIn]:
    with BidiStandIn(server.http_url, tls, endpoints={ENDPOINT_NAME: BidiBehaviour()}, secret_key=SECRET) as standin:
        yield standin


def sagemaker_env(transport: str, url: str, tls: SelfSigned) -> dict[str, str]:
    """Config through the environment (as a user would), dummy credentials, trust in the stand-in's certificate."""
    return {
        "VOICECLI_ENDPOINT__TARGET": "sagemaker",
        "VOICECLI_ENDPOINT__SAGEMAKER__NAME": ENDPOINT_NAME,
        "VOICECLI_ENDPOINT__SAGEMAKER__REGION": "us-east-1",
        "VOICECLI_ENDPOINT__SAGEMAKER__ENDPOINT_URL": url,
        "VOICECLI_ENDPOINT__SAGEMAKER__TRANSPORT": transport,
        "AWS_ACCESS_KEY_ID": "AKIDSTANDIN000000000",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
        "SSL_CERT_FILE": str(tls.cert),
    }


PIECE_S = 0.1
"""The reference is compared piece by piece (see piece_matches)."""


def piece_matches(recorded: Audio, reference: Audio, rate: int = SINK_RATE) -> list[tuple[int, float]]:
    """For each PIECE_S of `reference` with sound: (how much later it starts in `recorded` than in the reference,
    in samples; its normalised correlation there).

    Why pieces: an answer the endpoint synthesizes slower than real time runs dry, and the speaker plays a gap
    (measured on the Xeons of 2026-12: one of ~440 ms in a 1.66 s answer); one correlation over the whole answer
    then reads ~0.6 although every piece was played exactly. Gaps show as offsets that grow; what was played
    wrongly (decoded, resampled or ordered) shows as pieces that are not found."""
    size = round(PIECE_S * rate)
    # each piece is searched from its own start to the end of the recording (find_pieces cuts the capture there)
    padded = np.concatenate([recorded, np.zeros(len(reference) + size, np.float32)])
    return [(round(match.lag_s * rate), match.correlation)
            for _, match in find_pieces(reference, padded, rate, PIECE_S, len(recorded) / rate, -60.0)]


def assert_heard(run: SayRun, reference: Audio, transport: str) -> None:
    """Every piece of the endpoint's audio came out of the speaker, undistorted and in order (see piece_matches);
    gaps between pieces are the underruns the report counts."""
    report = run.report
    assert report["transport"] == transport
    check_timings(report, played=True)
    assert run.recorded is not None
    matches = piece_matches(run.recorded, upsample_2x(reference))
    correlations = [correlation for _, correlation in matches]
    assert len(matches) >= 0.6 * len(reference) / SAMPLE_RATE / PIECE_S, f"{transport}: {len(matches)} pieces"
    assert float(np.median(correlations)) >= MIN_CORRELATION, f"{transport}: piece correlations {correlations}"
    assert sum(c >= 0.8 for c in correlations) >= 0.9 * len(correlations), f"{transport}: {correlations}"
    offsets = [offset for offset, _ in matches]
    assert all(later >= earlier - 48 for earlier, later in itertools.pairwise(offsets)), f"{transport}: {offsets}"


# ------------------------------------------------------------------------------------------------------- played


@pytest.mark.slow
def test_websocket_plays_the_endpoints_audio(server: RunningServer, pulse: PrivatePulse, reference: Audio,
                                             home: Path) -> None:
    run = say([TEXT, "--endpoint", server.http_url, "--mode", "bidi", "--json"], home, pulse=pulse)
    assert_heard(run, reference, "websocket")
    assert run.report["endpoint"] == server.http_url


@pytest.mark.slow
def test_batch_plays_the_endpoints_audio(server: RunningServer, pulse: PrivatePulse, reference: Audio,
                                         home: Path) -> None:
    run = say([TEXT, "--endpoint", server.http_url, "--mode", "batch", "--json"], home, pulse=pulse)
    assert_heard(run, reference, "batch")


@pytest.mark.slow
def test_pcm16_over_websocket_plays_the_endpoints_audio(server: RunningServer, pulse: PrivatePulse,
                                                        reference: Audio, home: Path) -> None:
    run = say([TEXT, "--endpoint", server.ws_url, "--format", "pcm16", "--json"], home, pulse=pulse)
    assert_heard(run, reference, "websocket")
    assert run.report["format"] == "pcm16"


@pytest.mark.slow
def test_sagemaker_bidi_plays_the_endpoints_audio(bidi: BidiStandIn, tls: SelfSigned, pulse: PrivatePulse,
                                                  reference: Audio, home: Path) -> None:
    streams_before = len(bidi.records)
    run = say([TEXT, "--json"], home, sagemaker_env("bidi", bidi.url, tls), pulse)
    assert_heard(run, reference, "sagemaker-bidi")
    assert len(bidi.records) == streams_before + 1  # it really went through the HTTP/2 stand-in
    assert bidi.records[-1].signatures_verified > 0


@pytest.mark.slow
def test_sagemaker_stream_plays_the_endpoints_audio(runtime: SageMakerRuntimeStandIn, tls: SelfSigned,
                                                    pulse: PrivatePulse, reference: Audio, home: Path) -> None:
    run = say([TEXT, "--json"], home, sagemaker_env("stream", runtime.url, tls), pulse)
    assert_heard(run, reference, "sagemaker-stream")
    assert runtime.records[-1].operation == "invocations-response-stream"


@pytest.mark.slow
def test_sagemaker_batch_plays_the_endpoints_audio(runtime: SageMakerRuntimeStandIn, tls: SelfSigned,
                                                   pulse: PrivatePulse, reference: Audio, home: Path) -> None:
    run = say([TEXT, "--json"], home, sagemaker_env("batch", runtime.url, tls), pulse)
    assert_heard(run, reference, "sagemaker-batch")
    assert runtime.records[-1].operation == "invocations"


# ------------------------------------------------------------------------------------------------------- --out


@pytest.mark.slow
def test_out_pcm16_writes_the_endpoints_samples(server: RunningServer, reference: Audio, home: Path,
                                                tmp_path: Path) -> None:
    out = tmp_path / "reply.wav"
    run = say([TEXT, "--endpoint", server.http_url, "--format", "pcm16", "--out", str(out), "--json"], home)
    check_timings(run.report, played=False)
    rate, channels, samples = wav_samples(out.read_bytes())
    assert (rate, channels) == (SAMPLE_RATE, 1)
    assert len(samples) == len(reference)
    assert np.max(np.abs(samples - reference)) <= 2 / 32768  # the same samples, up to 16-bit rounding
    assert run.report["audio_seconds"] == pytest.approx(len(reference) / SAMPLE_RATE, abs=1e-3)


@pytest.mark.slow
def test_out_mp3_writes_the_endpoints_audio(server: RunningServer, reference: Audio, home: Path,
                                            tmp_path: Path) -> None:
    out = tmp_path / "reply.wav"
    run = say([TEXT, "--endpoint", server.http_url, "--mode", "batch", "--out", str(out), "--json"], home)
    report = run.report
    check_timings(report, played=False)
    assert report["out"] == str(out) and report["format"] == "mp3"
    rate, channels, samples = wav_samples(out.read_bytes())
    assert (rate, channels) == (SAMPLE_RATE, 1)
    assert abs(len(samples) - len(reference)) < 0.1 * SAMPLE_RATE  # MP3 adds only encoder delay and padding
    assert best_correlation(samples, reference) >= 0.98


def test_upsample_and_correlation_find_a_shifted_copy() -> None:
    """The comparison itself: a delayed, louder copy correlates ~1; unrelated noise does not."""
    rng = np.random.default_rng(7)
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    tone = (0.3 * np.sin(2 * np.pi * 440 * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)
    high = upsample_2x(tone)
    assert len(high) == 2 * len(tone)
    assert np.allclose(high[::2], tone, atol=1e-4)
    delayed = np.concatenate([np.zeros(12_345, np.float32), 1.4 * high, np.zeros(5_000, np.float32)])
    assert best_correlation(delayed.astype(np.float32), high) > 0.999
    noise = rng.standard_normal(len(delayed)).astype(np.float32) * 0.3
    assert best_correlation(noise, high) < 0.2
    # played with a 0.44 s gap halfway (an answer that ran dry): every piece found, in order, the later ones later
    voice = upsample_2x((0.1 * rng.standard_normal(SAMPLE_RATE)).astype(np.float32))  # nothing repeats in it
    half = len(voice) // 2
    gapped = np.concatenate([np.zeros(4_800, np.float32), voice[:half], np.zeros(21_120, np.float32), voice[half:]])
    assert best_correlation(gapped, voice) < 0.8
    matches = piece_matches(gapped, voice)
    assert len(matches) == len(voice) // round(PIECE_S * SINK_RATE)
    assert min(correlation for _, correlation in matches) > 0.99
    assert {offset for offset, _ in matches} == {4_800, 4_800 + 21_120}
    assert all(c < 0.5 for _, c in piece_matches(noise, voice))
    assert SINK_RATE == 2 * SAMPLE_RATE


# ------------------------------------------------------------------------------------------------------- errors


@pytest.mark.slow
def test_unknown_voice_exits_2_listing_the_voices(server: RunningServer, home: Path, tmp_path: Path) -> None:
    run = say([TEXT, "--endpoint", server.http_url, "--voice", "zz_nobody", "--out", str(tmp_path / "x.wav")], home)
    assert run.returncode == 2, run.stderr
    assert len(run.error_lines) == 1, run.stderr
    line = run.error_lines[0]
    assert "zz_nobody" in line
    assert all(voice in line for voice in ENGLISH_VOICES)
    assert not (tmp_path / "x.wav").exists()


def test_unreachable_endpoint_exits_2_with_advice(home: Path, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    run = say([TEXT, "--endpoint", dead, "--out", str(tmp_path / "x.wav")], home)
    assert run.returncode == 2, run.stderr
    assert len(run.error_lines) == 1, run.stderr
    assert "voicecli serve" in run.error_lines[0]
    assert "Traceback" not in run.stderr


def test_no_audio_device_exits_2_suggesting_out(home: Path, tmp_path: Path) -> None:
    """No sound server at all: the command must say to use --out instead of failing obscurely."""
    nowhere = tmp_path / "no-pulse"
    env = {"PULSE_SERVER": f"unix:{nowhere}/native", "PULSE_RUNTIME_PATH": str(nowhere),
           "XDG_RUNTIME_DIR": str(nowhere)}
    run = say([TEXT, "--endpoint", f"http://127.0.0.1:{free_port()}"], home, env)
    assert run.returncode == 2, run.stderr
    assert len(run.error_lines) == 1, run.stderr
    assert "--out" in run.error_lines[0]


# ------------------------------------------------------------------------------------------------------- hostile

BOUNDED_RSS_MB = 200.0
"""What `say` may take against a hostile endpoint: its ~60 MB of code and libraries, plus at most MAX_KEPT_S of
decoded audio (58 MB), with room to spare. The same probes used to take 3 GB (one 100 MB message) and 3.5 GB in 20 s
(an endless stream)."""


async def say_to(script: Script, home: Path, tmp_path: Path) -> SayRun:
    """`voicecli say --out` against a hostile endpoint running `script`."""
    async with HostileEndpoint(script) as endpoint:
        return await asyncio.to_thread(say, [TEXT, "--endpoint", endpoint.http_url, "--out",
                                             str(tmp_path / "x.wav")], home)


def assert_refused(run: SayRun, tmp_path: Path, *words: str) -> None:
    assert run.returncode == 2, run.stderr
    assert len(run.error_lines) == 1, run.stderr
    assert all(word in run.error_lines[0] for word in words), run.error_lines[0]
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "x.wav").exists()
    assert run.peak_rss_mb < BOUNDED_RSS_MB


async def test_a_message_over_the_limit_exits_2(home: Path, tmp_path: Path) -> None:
    size = 8 * MAX_MESSAGE_BYTES  # the probe sent 100 MB: that took say from 56 MB to 3 GB, 12,499 s of audio, exit 0

    async def script(session: Session) -> None:
        rid = await session.request()
        await session.send(start(rid), next(messages(size / 8000, size)), complete(rid))
        await honest(session)

    run = await say_to(script, home, tmp_path)
    assert_refused(run, tmp_path, f"over the client's limit of {MAX_MESSAGE_BYTES // 1024} KiB", "(message_too_large)")


async def test_an_endless_stream_exits_2_in_bounded_memory(home: Path, tmp_path: Path) -> None:
    async def script(session: Session) -> None:
        await session.stream(await session.request(), 2 * MAX_REQUEST_AUDIO_S)  # endless, as far as say can tell
        await honest(session)

    run = await say_to(script, home, tmp_path)
    assert_refused(run, tmp_path, f"more than {MAX_REQUEST_AUDIO_S:.0f} s of audio", "(audio_too_long)")


async def test_audio_before_synthesis_start_exits_2(home: Path, tmp_path: Path) -> None:
    """It used to exit 0 with 0 s of audio and no error."""
    async def script(session: Session) -> None:
        rid = await session.request()
        await session.send(*messages(1.0), start(rid), complete(rid, 1.0))
        await honest(session)

    run = await say_to(script, home, tmp_path)
    assert_refused(run, tmp_path, "broke the protocol: audio before any synthesis_start", "(protocol_error)")


async def test_say_keeps_at_most_its_limit_of_audio_whatever_the_transport() -> None:
    transport = BatchHttpTransport("http://127.0.0.1:9")  # never connected: its events are fed by hand
    reader = _SayAudio(transport, SpeechRequest(ANSWER_ID, TEXT, format="pcm16"), None)
    reader.track(ANSWER_ID)
    reader.close()
    ten_seconds = bytes(2 * 10 * SAMPLE_RATE)
    transport._emit(AudioStart(ANSWER_ID, "pcm16", SAMPLE_RATE))
    for _ in range(int(MAX_KEPT_S / 10) + 1):
        transport._emit(AudioChunk(ANSWER_ID, ten_seconds))
    transport._emit(AudioDone(ANSWER_ID, None))
    with pytest.raises(SayError, match=f"more than {MAX_KEPT_S:.0f} s of audio"):
        await asyncio.wait_for(reader.run(), 60)
    assert sum(piece.size for piece in reader.pieces) <= MAX_KEPT_S * SAMPLE_RATE
