"""voicecli.converse.turn_lines: the JSON lines `voicecli chat --no-tui` writes and `voicecli bench turns` reads."""

from __future__ import annotations

import json

from voicecli.converse.pipeline import AssistantDelta, TurnFailed, TurnFinished, TurnStarted
from voicecli.converse.timeline import TurnTimeline
from voicecli.converse.turn_lines import TurnLine, line_of, read_line


def test_each_transcript_event_round_trips_through_one_line() -> None:
    timeline = TurnTimeline(3, "bidi", "spoken")
    timeline.mark("speech_end", 10.0)
    timeline.mark("first_audio_played", 10.8)
    events = [TurnStarted(3, "What is the capital of France?", "spoken", "bidi"),
              TurnFinished(3, timeline, " Paris. ", "Paris.", interrupted=True),
              TurnFailed(3, "the LLM was throttled: try again in a minute")]
    lines = [line_of(event) for event in events]
    assert all(line is not None for line in lines)
    encoded = [line.encode() for line in lines if line is not None]
    assert all("\n" not in text and json.loads(text)["turn_id"] == 3 for text in encoded)
    started, finished, failed = (read_line(text) for text in encoded)
    assert started == TurnLine("turn_started", 3, "What is the capital of France?", origin="spoken")
    assert finished is not None and finished.text == "Paris." and finished.interrupted
    assert finished.timeline == timeline.to_json() and finished.timeline["marks_ms"]["first_audio_played"] == 800
    assert failed == TurnLine("turn_failed", 3, "the LLM was throttled: try again in a minute")


def test_other_events_and_foreign_lines_are_not_turns() -> None:
    assert line_of(AssistantDelta(1, "Par")) is None
    for line in ["", "you> hello", "[1, 2]", '{"event": "something_else"}', "{not json"]:
        assert read_line(line) is None


def test_a_finished_turn_carries_what_the_history_kept_and_a_barge_in_its_time() -> None:
    timeline = TurnTimeline(4, "bidi", "spoken")
    line = line_of(TurnFinished(4, timeline, "Paris is the capital. It is large.", " Paris is ", interrupted=True))
    assert line is not None
    finished = read_line(line.encode())
    assert finished is not None and finished.spoken == "Paris is" and finished.text.endswith("large.")
    barge_in = read_line(TurnLine("barge_in", 0, "", at=1234.5678).encode())
    assert barge_in == TurnLine("barge_in", 0, "", at=1234.5678)
    for event in ("voice_held", "voice_released"):  # the voice held for speech over it, and played on
        assert read_line(TurnLine(event, 0, "", at=1234.25).encode()) == TurnLine(event, 0, "", at=1234.25)
