"""Streaming MP3 decoding must equal miniaudio's whole-file decode of the same bytes, sample for sample.

Streams: lameenc CBR (24 kHz mono 64 kbps: what the endpoint sends; 44.1 kHz stereo 128 kbps: MPEG-1), and the
`lame` CLI for VBR and for Xing/Info frames (with and without: `-t` disables it). The comparison is exact
(np.array_equal on float32): both sides run the same dr_mp3 code on the same frames.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import wave
from collections.abc import Callable
from pathlib import Path

import lameenc
import miniaudio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from voicecli.audio.mp3_decode import LAME_TOTAL_DELAY, Mp3DecodeError, Mp3StreamDecoder
from voicecli.audio.mp3_frames import parse_header

RATE = 24000


def _speechlike(rate: int, seconds: float, channels: int = 1, seed: int = 0) -> NDArray[np.float32]:
    """Chirps, noise bursts and silences: exercises short/long blocks and an empty-then-full bit reservoir."""
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    t = np.arange(n) / rate
    sig = 0.4 * np.sin(2 * np.pi * (150 * t + 900 * t * t)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    bursts = rng.standard_normal(n) * (np.sin(2 * np.pi * 1.3 * t) > 0.6) * 0.2
    sig = sig + bursts
    sig[int(0.3 * n) : int(0.4 * n)] = 0.0  # digital silence in the middle
    if channels == 2:
        right = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.5 * sig
        return np.stack([sig, right], axis=1).astype(np.float32)
    return sig.astype(np.float32)


def _pcm16(x: NDArray[np.float32]) -> bytes:
    return (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()


def _lameenc(rate: int, channels: int, kbps: int) -> bytes:
    enc = lameenc.Encoder()
    enc.set_bit_rate(kbps)
    enc.set_in_sample_rate(rate)
    enc.set_out_sample_rate(rate)
    enc.set_channels(channels)
    enc.set_quality(2)
    return bytes(enc.encode(_pcm16(_speechlike(rate, 2.5, channels)))) + bytes(enc.flush())


def _lame_cli(tmp: Path, rate: int, channels: int, args: list[str], name: str) -> bytes:
    if shutil.which("lame") is None:
        pytest.skip("the `lame` CLI is not installed (apt-get install lame)")
    wav = tmp / f"{name}.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(_pcm16(_speechlike(rate, 2.5, channels, seed=1)))
    out = tmp / f"{name}.mp3"
    subprocess.run(["lame", "--quiet", *args, str(wav), str(out)], check=True)
    return out.read_bytes()


STREAMS: dict[str, Callable[[Path], bytes]] = {
    "lameenc-24k-mono-64k": lambda tmp: _lameenc(24000, 1, 64),
    "lameenc-44k-stereo-128k": lambda tmp: _lameenc(44100, 2, 128),
    "lame-cbr-info-frame": lambda tmp: _lame_cli(tmp, 24000, 1, ["-b", "64"], "cbr"),
    "lame-cbr-no-info-frame": lambda tmp: _lame_cli(tmp, 24000, 1, ["-b", "64", "-t"], "cbr_t"),
    "lame-vbr-xing": lambda tmp: _lame_cli(tmp, 24000, 1, ["-V", "5"], "vbr"),
    "lame-vbr-no-xing": lambda tmp: _lame_cli(tmp, 24000, 1, ["-V", "5", "-t", "--nohist"], "vbr_t"),
    "lame-vbr-stereo-44k-xing": lambda tmp: _lame_cli(tmp, 44100, 2, ["-V", "2"], "vbr_st"),
    "lame-mpeg25-8k": lambda tmp: _lame_cli(tmp, 8000, 1, ["-b", "16"], "mpeg25"),
    "lame-id3v1-v2-tags": lambda tmp: _lame_cli(
        tmp, 24000, 1, ["-b", "48", "--add-id3v2", "--tt", "title", "--ta", "artist"], "tagged"
    ),
}


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return {}


def _stream(name: str, streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> bytes:
    if name not in streams:
        streams[name] = STREAMS[name](tmp_path_factory.mktemp(name))
    return streams[name]


def _format(dec: Mp3StreamDecoder) -> tuple[int | None, int | None]:
    return dec.sample_rate, dec.channels


def whole_file(data: bytes) -> NDArray[np.float32]:
    return np.frombuffer(miniaudio.mp3_read_f32(data).samples, dtype=np.float32)


def stream_decode(data: bytes, sizes: Callable[[], int], **kwargs: int) -> tuple[NDArray[np.float32], Mp3StreamDecoder]:
    dec = Mp3StreamDecoder(**kwargs)
    out = []
    pos = 0
    while pos < len(data):
        n = sizes()
        out.append(dec.feed(data[pos : pos + n]))
        pos += n
    out.append(dec.flush())
    return np.concatenate(out), dec


@pytest.mark.parametrize("name", sorted(STREAMS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_chunks_equal_whole_file_decode(
    name: str, seed: int, streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = _stream(name, streams, tmp_path_factory)
    rng = random.Random(seed)
    got, dec = stream_decode(data, lambda: rng.randint(1, 700))
    want = whole_file(data)
    assert got.dtype == np.float32
    assert got.shape == want.shape
    assert np.array_equal(got, want)  # exact: same dr_mp3 code on the same frames
    info = miniaudio.mp3_get_info(data)
    assert (dec.sample_rate, dec.channels) == (info.sample_rate, info.nchannels)


def test_info_frame_gives_gapless_length(streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> None:
    data = _stream("lame-vbr-xing", streams, tmp_path_factory)
    got, dec = stream_decode(data, lambda: 333)
    assert dec.gapless_info is not None and dec.gapless_info.vbr
    assert dec.gapless_info.delay == 576 + 529
    assert got.shape[0] == int(24000 * 2.5)  # exactly the encoded PCM: delay and padding trimmed


def test_optional_lame_delay_trim_without_info_frame(
    streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = _stream("lameenc-24k-mono-64k", streams, tmp_path_factory)
    rng = random.Random(5)
    got, dec = stream_decode(data, lambda: rng.randint(1, 700), lame_delay_without_info_frame=LAME_TOTAL_DELAY)
    assert dec.gapless_info is None
    assert np.array_equal(got, whole_file(data)[LAME_TOTAL_DELAY:])


def test_frame_is_decoded_the_moment_it_completes(
    streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = _stream("lameenc-24k-mono-64k", streams, tmp_path_factory)
    dec = Mp3StreamDecoder()
    assert _format(dec) == (None, None)
    first = parse_header(data)
    assert first is not None
    assert dec.feed(data[: first.length - 1]).size == 0
    out = dec.feed(data[first.length - 1 : first.length])
    assert out.size == 576  # no look-ahead: the first frame plays before the second arrives
    assert _format(dec) == (24000, 1)
    assert np.array_equal(out, whole_file(data)[:576])


def test_hypothesis_chunkings_equal_whole_file(
    streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = _stream("lameenc-24k-mono-64k", streams, tmp_path_factory)[:6000]
    want = whole_file(data)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.integers(1, 700), min_size=1, max_size=60))
    def check(sizes: list[int]) -> None:
        it = iter(sizes * (len(data) // max(1, sum(sizes)) + 1))
        got, _ = stream_decode(data, lambda: next(it))
        assert np.array_equal(got, want)

    check()


def test_leading_garbage_is_skipped(streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> None:
    data = _stream("lameenc-24k-mono-64k", streams, tmp_path_factory)
    garbage = bytes(np.random.default_rng(3).integers(0, 0xFF, 1000, dtype=np.uint8))  # no 0xFF: no false sync
    got, dec = stream_decode(garbage + data, lambda: 100)
    assert np.array_equal(got, whole_file(garbage + data))
    assert np.array_equal(got, whole_file(data))
    assert dec.stats.bytes_skipped == len(garbage)


def test_resynchronises_after_garbage_between_streams(
    streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = _stream("lameenc-24k-mono-64k", streams, tmp_path_factory)
    garbage = b"\x00\x01garbage\xff\xfe" * 40
    got, dec = stream_decode(data + garbage + data, lambda: 257)
    one = whole_file(data)
    # Each lameenc stream starts with an empty bit reservoir, so both decode fully; the decoder resynced once.
    assert np.array_equal(got, np.concatenate([one, one]))
    assert dec.stats.resyncs == 1
    assert dec.stats.bytes_skipped == len(garbage)


@pytest.mark.parametrize("cut", [3, 100, 191, 192 * 10 + 2])
def test_truncated_stream_keeps_complete_frames(
    cut: int, streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = _stream("lameenc-24k-mono-64k", streams, tmp_path_factory)
    truncated = data[: len(data) - cut]
    got, dec = stream_decode(truncated, lambda: 500)
    want = whole_file(truncated)
    # miniaudio also drops the frame before an incomplete header (< 4 bytes); we already played it.
    assert np.array_equal(got[: want.shape[0]], want)
    assert got.shape[0] - want.shape[0] in (0, 576)
    assert dec.stats.truncated_tail_bytes > 0


def test_sample_rate_change_is_an_error(streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> None:
    mono = _stream("lameenc-24k-mono-64k", streams, tmp_path_factory)
    stereo = _stream("lameenc-44k-stereo-128k", streams, tmp_path_factory)
    dec = Mp3StreamDecoder()
    dec.feed(mono)
    with pytest.raises(Mp3DecodeError, match="sample rate changed"):
        dec.feed(stereo)
        dec.flush()


def test_pure_garbage_is_an_error() -> None:
    dec = Mp3StreamDecoder()
    assert dec.feed(b"this is not an mp3 stream" * 10).size == 0
    with pytest.raises(Mp3DecodeError, match="no MPEG Layer III frame"):
        dec.flush()


def test_endless_garbage_is_an_error_not_a_hang() -> None:
    dec = Mp3StreamDecoder(max_garbage_bytes=4096)
    with pytest.raises(Mp3DecodeError, match="no valid MP3 frame header"):
        for _ in range(100):
            dec.feed(bytes(range(0, 0xFF)) * 4)


def test_feed_after_flush_is_an_error(streams: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> None:
    data = _stream("lameenc-24k-mono-64k", streams, tmp_path_factory)
    dec = Mp3StreamDecoder()
    dec.feed(data)
    dec.flush()
    with pytest.raises(Mp3DecodeError):
        dec.feed(data)


def _feed_all(data: bytes, sizes: list[int]) -> None:
    dec = Mp3StreamDecoder(max_garbage_bytes=2048)
    try:
        pos, k = 0, 0
        while pos < len(data):
            n = sizes[k % len(sizes)]
            out = dec.feed(data[pos : pos + n])
            assert out.dtype == np.float32 and np.all(np.isfinite(out))
            pos, k = pos + n, k + 1
        dec.flush()
    except Mp3DecodeError:
        pass  # the only acceptable failure


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=0, max_size=4000), st.lists(st.integers(1, 700), min_size=1, max_size=8))
def test_random_bytes_never_hang_or_crash(data: bytes, sizes: list[int]) -> None:
    _feed_all(data, sizes)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5999), st.integers(0, 255)), min_size=1, max_size=30),
    st.lists(st.integers(1, 700), min_size=1, max_size=8),
)
def test_corrupted_stream_never_hangs_or_crashes(flips: list[tuple[int, int]], sizes: list[int]) -> None:
    data = bytearray(_CORRUPTION_BASE)
    for pos, value in flips:
        data[pos % len(data)] = value
    _feed_all(bytes(data), sizes)


_CORRUPTION_BASE = _lameenc(24000, 1, 64)[:6000]


_TRUNCATION_BASE = _lameenc(24000, 1, 64)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, len(_TRUNCATION_BASE) - 1), st.lists(st.integers(1, 900), min_size=1, max_size=8))
def test_any_truncation_keeps_the_complete_frames_and_never_hangs(cut: int, sizes: list[int]) -> None:
    """A connection that dies anywhere mid-stream: what arrived decodes as the whole-file decoder would, no
    more than one frame (576 samples) longer (the frame before an incomplete header, already played), or the
    decoder says clearly that nothing was a frame."""
    truncated = _TRUNCATION_BASE[:cut]
    k = iter(range(1 << 30))
    try:
        got, _ = stream_decode(truncated, lambda: sizes[next(k) % len(sizes)])
    except Mp3DecodeError as exc:
        assert "no MPEG Layer III frame" in str(exc) or "no valid MP3 frame header" in str(exc), exc
        return
    try:
        want = whole_file(truncated) if cut >= 4 else np.zeros(0, np.float32)
    except miniaudio.DecodeError:  # one frame and a stray byte: the whole-file decoder itself finds no stream
        want = np.zeros(0, np.float32)
    assert got.dtype == np.float32 and np.all(np.isfinite(got))
    assert np.array_equal(got[: want.shape[0]], want)
    assert got.shape[0] - want.shape[0] in (0, 576)


@pytest.mark.parametrize("at", [0, 1234, 4801, 20_000])
def test_the_endpoints_streams_decode_gaplessly_with_the_protocols_delay(at: int) -> None:
    """The endpoint's MP3 encoder (as it streams, no Info frame) + this decoder told LAME_TOTAL_DELAY, as the
    pipeline does: a click comes out at the very sample it went in, so dropping the codec delay never cuts sound."""
    from voicecli_endpoint.audio_encoding import stream_encoder

    audio = np.zeros(24_000, np.float32)
    audio[at : at + 240] = 0.5 * np.sin(np.arange(240) / 3)
    encoder = stream_encoder("mp3")
    decoder = Mp3StreamDecoder(lame_delay_without_info_frame=LAME_TOTAL_DELAY)
    out = np.concatenate([decoder.feed(m) for m in [*encoder.encode(audio), *encoder.flush()]] + [decoder.flush()])
    assert int(np.flatnonzero(np.abs(out) > 0.05)[0]) == int(np.flatnonzero(np.abs(audio) > 0.05)[0])
    assert len(out) >= len(audio)
