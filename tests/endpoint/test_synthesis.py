"""Trimming Kokoro's pad silence: what each piece keeps before and after its sound, and why it differs."""

from __future__ import annotations

import asyncio
import itertools
import time

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from voicecli_endpoint.synthesis import (
    LEAD_KEEP_S,
    MID_PHRASE_TAIL_KEEP_S,
    SILENCE_DBFS,
    TAIL_KEEP_S,
    SilenceTrimmer,
    tail_keep_s,
    trim_silence,
)
from websockets.asyncio.client import connect

from tests.conftest import RunningServer
from tests.endpoint.helpers import read_answers, recv_frame, send_json
from voicecli.wire.protocol import Mp3Audio

RATE = 24_000


def padded(lead_s: float, sound_s: float, tail_s: float) -> np.ndarray:
    quiet = 10 ** ((SILENCE_DBFS - 25) / 20)  # Kokoro's pad sits near -80 dBFS: not silent, but below the gate
    audio = np.full(round((lead_s + sound_s + tail_s) * RATE), quiet, dtype=np.float32)
    start = round(lead_s * RATE)
    audio[start : start + round(sound_s * RATE)] = 0.3
    return audio


def test_trim_keeps_the_short_lead_and_the_asked_tail() -> None:
    trimmed = trim_silence(padded(0.35, 1.0, 0.45), RATE, tail_keep_s=0.1)
    assert len(trimmed) == round((LEAD_KEEP_S + 1.0 + 0.1) * RATE)
    assert trimmed[round(LEAD_KEEP_S * RATE)] == pytest.approx(0.3)


def test_a_piece_without_sound_is_kept_whole() -> None:
    silent = np.zeros(RATE, dtype=np.float32)
    assert np.array_equal(trim_silence(silent, RATE), silent)


@given(lead=st.floats(0.0, 0.5), sound=st.floats(0.0, 1.0), gap=st.floats(0.0, 0.3), tail=st.floats(0.0, 0.5),
       cuts=st.lists(st.floats(0.0, 1.0), max_size=6), tail_keep=st.sampled_from([TAIL_KEEP_S, 0.04]))
def test_a_piece_trimmed_in_parts_is_the_piece_trimmed_whole(lead: float, sound: float, gap: float, tail: float,
                                                             cuts: list[float], tail_keep: float) -> None:
    """The endpoint trims a turn's first piece part by part as the parts come (SilenceTrimmer): whatever the cuts,
    including cuts inside the silence between two sounds, the samples sent are exactly those of trim_silence."""
    audio = np.concatenate([padded(lead, sound, gap), padded(0.0, sound / 2, tail)])
    bounds = sorted({0, len(audio), *(round(cut * len(audio)) for cut in cuts)})
    trimmer = SilenceTrimmer(RATE, tail_keep_s=tail_keep)
    sent = [trimmer.feed(audio[a:b]) for a, b in itertools.pairwise(bounds)]
    sent.append(trimmer.finish())
    assert np.array_equal(np.concatenate(sent), trim_silence(audio, RATE, tail_keep_s=tail_keep))


@pytest.mark.parametrize(
    ("text", "tail"),
    [
        ("The capital of France is Paris.", TAIL_KEEP_S),
        ("A spider has eight legs,", TAIL_KEEP_S),
        ("Is it? ", TAIL_KEEP_S),
        ("Well —", TAIL_KEEP_S),
        ("The capital of France", MID_PHRASE_TAIL_KEEP_S),  # the adaptive first fragment's cut
        ("It costs 42", MID_PHRASE_TAIL_KEEP_S),
    ],
)
def test_a_text_that_stops_mid_phrase_keeps_a_short_tail(text: str, tail: float) -> None:
    assert tail_keep_s(text) == tail


def trailing_silence_s(samples: np.ndarray) -> float:
    loud = np.flatnonzero(np.abs(samples) > 10 ** (SILENCE_DBFS / 20))
    return (len(samples) - 1 - int(loud[-1])) / RATE


async def test_the_endpoint_ends_a_mid_phrase_piece_sooner(server: RunningServer) -> None:
    """Over the real server: the cut first fragment ends ~40 ms after its sound, a clause ~250 ms after."""
    async with connect(server.ws_url) as ws:
        for rid, text in enumerate(["The capital of France", "The capital of France,"]):
            await send_json(ws, {"text": text, "request_id": rid, "format": "pcm16"})
        received = await read_answers(ws, 2)
    tails = []
    for answer in received.answers:
        pcm = b"".join(answer.audio)
        tails.append(trailing_silence_s(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0))
    assert tails[0] == pytest.approx(MID_PHRASE_TAIL_KEEP_S, abs=0.01)
    assert tails[1] == pytest.approx(TAIL_KEEP_S, abs=0.01)


async def test_clients_that_leave_during_a_first_piece_never_wedge_a_worker(server: RunningServer) -> None:
    """Issue 23's probe: close the WebSocket right after the first audio frame of a turn's first piece (decoded in
    parts, so a worker is often running the next part). Before Stepper, ~2 closes in 10 left a worker stuck for good
    (`/stats` running 1 at 0% CPU) and logged "generator already executing" tracebacks."""
    log_start = server.log_path.stat().st_size
    for _ in range(10):
        async with connect(server.ws_url) as ws:
            await send_json(ws, {"text": "Hello there, this is a latency check.", "request_id": 1})
            while not isinstance(await recv_frame(ws), Mp3Audio):
                pass
    deadline = time.monotonic() + 20
    def running() -> int:
        return int(httpx.get(f"{server.http_url}/stats", timeout=10).json()["scheduler"]["running"])

    while running() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert running() == 0
    async with connect(server.ws_url) as ws:  # both workers still serve
        for rid in range(2):
            await send_json(ws, {"text": "Still here.", "request_id": rid})
        received = await read_answers(ws, 2)
    assert all(answer.complete is not None for answer in received.answers)
    with server.log_path.open("rb") as log:
        log.seek(log_start)
        logged = log.read().decode(errors="replace")
    assert "Traceback" not in logged and "already executing" not in logged, logged[-3000:]


async def test_a_hostile_word_group_neither_stalls_others_nor_outlives_its_sender(server: RunningServer) -> None:
    """Issue 23's probe: `-`-joined a's (misaki's cost was cubic in the group: n=120 held every other session's
    first audio ~4-5 s, n=160 took 10.7 s alone) sent, then the sender leaves after 0.3 s; another session's
    answer must not wait for it. 5 s is ~20x today's first audio on a busy CI machine, a quarter of the old case."""
    async with connect(server.ws_url) as hostile:
        await send_json(hostile, {"text": "-".join(["a"] * 160), "request_id": 1})
        await asyncio.sleep(0.3)
    started = time.monotonic()
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": "Hello.", "request_id": 2})
        while not isinstance(await recv_frame(ws, timeout=30), Mp3Audio):
            pass
    assert time.monotonic() - started < 5.0
