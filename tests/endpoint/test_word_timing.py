"""Word times from Kokoro's durations: the mapping on made-up durations (fast), the real ONNX engine's durations
against its audio, and the real endpoint's `words` frames against the MP3 a client decodes (slow tier: `models_dir`
and `server` put them there)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
from voicecli_endpoint.chunking import ChunkPolicy, chunk_phonemes
from voicecli_endpoint.engines.base import TimedAudio
from voicecli_endpoint.engines.decoder_parts import FRAME_SAMPLES
from voicecli_endpoint.g2p import Spelled, owners_of, spell_words
from voicecli_endpoint.synthesis import SilenceTrimmer
from voicecli_endpoint.word_timing import char_starts, piece_owners, piece_words, spans

from tests.conftest import RunningServer
from voicecli.audio.streams import answer_decoder
from voicecli.tts.base import AudioChunk, AudioDone, AudioWords, SpeechRequest
from voicecli.tts.websocket import WebSocketTransport
from voicecli.wire.protocol import SAMPLE_RATE, WordTiming

MP3_FRAME_SAMPLES = 576
"""Samples of one MPEG-2 Layer III frame at 24 kHz: the decoded audio is a whole number of them."""


class _Token:
    def __init__(self, text: str, phonemes: str | None, whitespace: str) -> None:
        self.text, self.phonemes, self.whitespace = text, phonemes, whitespace


def spelled(*words: tuple[str, str]) -> Spelled:
    phonemes = " ".join(" ".join(p for _, p in words).split())
    owner = owners_of(list(words), phonemes)
    assert owner is not None
    return Spelled(phonemes, tuple(w for w, _ in words), owner)


def test_misaki_tokens_join_into_the_words_between_spaces() -> None:
    tokens = [_Token("Hello", "həlˈO", ""), _Token(",", ",", " "), _Token("world", "wˈɜɹld", ""), _Token(".", ".", "")]
    words = spell_words(tokens)
    assert words == [("Hello,", "həlˈO,"), ("world.", "wˈɜɹld.")]
    assert owners_of(words, "həlˈO, wˈɜɹld.") == (0,) * 6 + (-1,) + (1,) * 7
    assert owners_of(words, "həlˈO wˈɜɹld.") is None  # not what the words spell: no owners rather than wrong ones


def test_a_word_spelled_as_several_phoneme_words_owns_them_all() -> None:
    words = [("has", "hæz"), ("21", "twˈɛnti wˈʌn"), ("cats", "kˈæts")]
    owner = owners_of(words, "hæz twˈɛnti wˈʌn kˈæts")
    assert owner is not None and owner[4:16] == (1,) * 7 + (-1,) + (1,) * 4 and owner[16] == -1


def test_word_times_follow_the_durations_and_tile_the_piece() -> None:
    text = spelled(("Hi", "hI"), ("there.", "ðɛɹ."))
    # Tokens: boundary, h, I, space, ð, ɛ, ɹ, ., boundary
    durations = np.array([4, 2, 3, 1, 2, 2, 2, 1, 5], dtype=np.int64)
    starts = char_starts(text.phonemes, text.phonemes, durations)
    assert starts[0] == 4 * FRAME_SAMPLES and starts[3] == 10 * FRAME_SAMPLES  # h, then ð after I and the space
    length = int(durations.sum()) * FRAME_SAMPLES
    words = spans(text, text.owner or (), starts, after=-1, lead_dropped=0, length=length)
    assert [(w.text, w.start, w.end) for w in words] == [("Hi", 0, 10 * FRAME_SAMPLES),
                                                       ("there.", 10 * FRAME_SAMPLES, length)]


def test_a_piece_in_parts_sends_all_its_words_but_the_last_before_its_audio_is_complete() -> None:
    """With the first part (its durations known, a little audio kept) every word but the last is timed, as it will
    be once the piece is complete; the last, whose end is the trimmed tail's, comes with the piece's last audio."""
    text = spelled(("One", "wˈʌn"), ("two", "tˈu"), ("three.", "θɹˈi."))
    durations = np.array([3, *([2] * (len(text.phonemes))), 4], dtype=np.int64)
    timed = TimedAudio(np.zeros(0, np.float32), durations, text.phonemes)
    owner = text.owner or ()
    early = piece_words(text, owner, text.phonemes, timed, -1, 3 * FRAME_SAMPLES, 5 * FRAME_SAMPLES, False)
    final_length = int(durations.sum() - 3 - 2) * FRAME_SAMPLES  # the lead and some of the tail trimmed
    final = piece_words(text, owner, text.phonemes, timed, -1, 3 * FRAME_SAMPLES, final_length, True)
    assert [w.text for w in early] == ["One", "two"] and [w.text for w in final] == ["One", "two", "three."]
    assert early == final[:2]  # the same times, sent sooner
    assert final[-1].end == final_length


def test_trimmed_lead_shifts_the_times_and_a_trimmed_tail_clips_them() -> None:
    text = spelled(("a", "A"), ("b", "b"), ("c", "k"))
    durations = np.array([10, 4, 1, 4, 1, 4, 10], dtype=np.int64)
    starts = char_starts(text.phonemes, text.phonemes, durations)
    kept = 12 * FRAME_SAMPLES  # 8 frames of lead trimmed, the tail cut short
    words = spans(text, text.owner or (), starts, after=-1, lead_dropped=8 * FRAME_SAMPLES, length=kept)
    assert [(w.start, w.end) for w in words] == [(0, 7 * FRAME_SAMPLES), (7 * FRAME_SAMPLES, 12 * FRAME_SAMPLES),
                                                 (12 * FRAME_SAMPLES, kept)]


def test_symbols_the_model_never_saw_take_no_time_and_soundless_words_last_nothing() -> None:
    text = spelled(("yes", "jˈɛs"), ("—", "—"), ("no", "nO"))
    symbols = text.phonemes.replace("—", "")  # a model without the dash in its vocabulary
    durations = np.array([0, *([2] * len(symbols)), 0], dtype=np.int64)
    starts = char_starts(text.phonemes, symbols, durations)
    assert starts[text.phonemes.index("—")] is None
    length = int(durations.sum()) * FRAME_SAMPLES
    words = spans(text, text.owner or (), starts, after=-1, lead_dropped=0, length=length)
    assert [w.text for w in words] == ["yes", "—", "no"]
    assert words[1].start == words[1].end == words[2].start


def test_pieces_find_their_words_and_each_word_is_timed_once() -> None:
    text = spelled(("One,", "wˈʌn,"), ("two", "tˈu"), ("three", "θɹˈi"), ("four.", "fˈɔɹ."), ("Five.", "fˈIv."))
    pieces = chunk_phonemes(text.phonemes, ChunkPolicy(first_clause_min=2))
    assert pieces == ["wˈʌn,", "tˈu θɹˈi fˈɔɹ.", "fˈIv."]
    owners = piece_owners(text, pieces)
    timed: list[str] = []
    after = -1
    for piece, owner in zip(pieces, owners, strict=True):
        assert owner is not None
        durations = np.ones(len(piece) + 2, dtype=np.int64)
        words = spans(text, owner, char_starts(piece, piece, durations), after, 0, len(durations) * FRAME_SAMPLES)
        timed += [w.text for w in words]
        after = max(w.index for w in words)
    assert timed == list(text.words)


def test_the_trimmer_says_how_much_lead_it_dropped_across_parts() -> None:
    quiet, loud = np.zeros(3000, np.float32), np.full(1000, 0.5, np.float32)
    trimmer = SilenceTrimmer(SAMPLE_RATE, lead_keep_s=0.01)
    assert trimmer.feed(quiet).size == 0  # all silence so far: held
    kept = trimmer.feed(np.concatenate([quiet, loud]))
    assert trimmer.lead_dropped == 6000 - 240 and kept.size == 240 + 1000


# --------------------------------------------------------------------------------------------------- slow tier


def test_onnx_durations_are_the_audio(models_dir: Path) -> None:
    """The duration output the engine adds to the encoder half covers exactly the samples it decodes, whole or in
    parts, at any speed."""
    from voicecli_endpoint.engines.onnx_engine import OnnxEngine
    from voicecli_endpoint.g2p import Phonemizer

    engine = OnnxEngine(models_dir, threads=2)
    text = Phonemizer().spell("Hello there, this is a test of the speech engine.")
    assert text.owner is not None and len(text.words) == 10
    for speed in (1.0, 1.3):
        timed = engine.synthesize_timed(text.phonemes, "af_heart", speed)
        assert len(timed.durations) == len(timed.symbols) + 2 and timed.symbols == text.phonemes
        assert int(timed.durations.sum()) * FRAME_SAMPLES == len(timed.audio)
        parts = list(engine.synthesize_parts_timed(text.phonemes, "af_heart", speed))
        first = parts[0][2]
        assert first is not None and np.array_equal(first.durations, timed.durations)
        assert sum(len(audio) for audio, _, _ in parts) == len(timed.audio)


async def test_the_endpoint_times_every_word_of_the_audio_a_client_decodes(server: RunningServer) -> None:
    """Over the real WebSocket: asked for, the words come, one per word of the text, tiling the audio, and end
    where the decoded MP3 ends (within one MP3 frame, which pads the last); not asked for, none come. The first
    piece of the first request (a turn's, sent in parts) has its words but the last with its first part: they reach
    past the audio decoded when they arrive (a listener interrupted then must know which words it heard)."""
    texts = ["The voice assistant is a sentient AI entity, and it keeps going for a while after that.",
             "The capital of France is Paris."]
    async with WebSocketTransport(server.http_url) as transport:
        for index, text in enumerate(texts):
            await transport.send(SpeechRequest(f"r{index}", text, word_timings=True))
            decoder, decoded, words = answer_decoder("mp3"), 0, list[WordTiming]()
            ahead_ms: list[float] = []  # per words frame: how far its words reach past the audio decoded by then
            while True:
                event = await transport.next_event(120)
                if isinstance(event, AudioChunk):
                    decoded += decoder.feed(event.data).size
                elif isinstance(event, AudioWords):
                    words += event.words
                    ahead_ms.append(event.words[-1].end_ms - decoded * 1000 / SAMPLE_RATE)
                elif isinstance(event, AudioDone):
                    decoded += decoder.flush().size
                    break
            assert [w.w for w in words] == text.split()
            assert all(a.end_ms == b.start_ms for a, b in itertools.pairwise(words))
            assert words[0].start_ms == 0 and all(w.end_ms > w.start_ms for w in words)
            assert 0 <= decoded - words[-1].end_ms * SAMPLE_RATE / 1000 < MP3_FRAME_SAMPLES + 1
            if index == 0:  # "The voice assistant is a sentient AI entity," in parts: its first words came early
                assert ahead_ms[0] > 500, ahead_ms
        await transport.send(SpeechRequest("plain", "No words were asked for."))
        kinds: list[type] = []
        while not kinds or kinds[-1] is not AudioDone:
            kinds.append(type(await transport.next_event(120)))
        assert AudioWords not in kinds and AudioChunk in kinds
