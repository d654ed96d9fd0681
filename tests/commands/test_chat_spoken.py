"""Spoken turns end to end: an espeak-ng prompt played into the virtual microphone, the real STT, the real endpoint,
the answer captured from the virtual speaker.

The LLM is the real boto3 Bedrock client on the ConverseStream stand-in, which holds the answer after its first
sentence until the test HEARS audio on the speaker: so "first audio played before the LLM finished" is proven by
causality, not by a clock.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, RunningServer
from tests.pulse import PrivatePulse
from tests.standins import bedrock as standin
from tests.standins.bedrock import BedrockStandIn
from voicecli.converse.turn_lines import TurnLine, read_line

pytestmark = pytest.mark.slow
AUDIBLE_DBFS = -45.0


def espeak(text: str, path: Path) -> Path:
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "120", "-w", str(path), text], check=True, timeout=60)
    return path


class Chat:
    """`voicecli chat --no-tui` as a child process, with its stderr followed line by line."""

    def __init__(self, pulse: PrivatePulse, server: RunningServer, bedrock_url: str, models_dir: Path,
                 turns: int, tmp_path: Path, **env: str) -> None:
        child_env = {
            **pulse.child_env(),
            "AWS_ACCESS_KEY_ID": "AKIDSTANDIN", "AWS_SECRET_ACCESS_KEY": "standin-secret",
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(tmp_path / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
            "VOICECLI_LLM__BEDROCK__ENDPOINT_URL": bedrock_url,
            "VOICECLI_MODELS__DIR": str(models_dir),
            "XDG_STATE_HOME": str(tmp_path / "state"),
            **env,
        }
        child_env.pop("AWS_PROFILE", None)
        python = REPO / ".venv" / "bin" / "python"
        self.process = subprocess.Popen(
            [str(python if python.exists() else sys.executable), "-m", "voicecli", "--endpoint", server.http_url,
             "--llm", "bedrock", "chat", "--no-tui", "--turns", str(turns)],
            cwd=REPO, env=child_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.rstrip())

    def wait_for_stderr(self, needle: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not any(needle in line for line in self.stderr):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {needle!r} in stderr:\n" + "\n".join(self.stderr))
            time.sleep(0.05)

    def finish(self, timeout: float = 300) -> tuple[list[TurnLine], list[dict[str, Any]]]:
        out, _ = self.process.communicate(timeout=timeout)
        self._reader.join(timeout=5)
        assert self.process.returncode == 0, "\n".join(self.stderr)
        turns = [turn for line in out.splitlines() if (turn := read_line(line)) is not None]
        return turns, [turn.timeline for turn in turns if turn.event == "turn_finished"]


def wait_audible(recorder: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while recorder.recent_dbfs() < AUDIBLE_DBFS:
        if time.monotonic() > deadline:
            raise AssertionError("nothing audible on the virtual speaker")
        time.sleep(0.02)


def test_spoken_turn_is_transcribed_answered_and_heard(
    pulse: PrivatePulse, server: RunningServer, models_dir: Path, tmp_path: Path
) -> None:
    release = threading.Event()
    prompt = espeak("How many legs does a spider have?", tmp_path / "prompt.wav")
    with BedrockStandIn() as bedrock:
        bedrock.queue(standin.Reply(
            deltas=["A spider has eight legs.", " Insects have six of them.", " Many people fear spiders."],
            hold_at=2, release=release, hold_timeout_s=240))
        chat = Chat(pulse, server, bedrock.url, models_dir, 1, tmp_path)
        chat.wait_for_stderr("listening on")
        recorder = pulse.record()
        pulse.play_into_mic(prompt)
        wait_audible(recorder)  # the first sentence is being played ...
        release.set()  # ... and only now may the LLM finish its answer
        lines, timelines = chat.finish()
        captured = recorder.stop()
    heard = next(turn.text for turn in lines if turn.origin == "spoken").lower()
    assert "spider" in heard and "legs" in heard
    assert "question" not in heard
    assert bedrock.requests[0].body["messages"][-1]["content"][0]["text"].lower().startswith("how many legs")
    (timeline,) = timelines
    marks = timeline["marks_ms"]
    expected = ["speech_start", "speech_end", "transcript_ready", "llm_request", "llm_first_token",
                "first_sentence_ready", "tts_first_request_sent", "first_audio_byte", "first_audio_played",
                "llm_done", "turn_done"]
    assert set(expected) <= set(marks)
    chain = [m for m in expected if m != "llm_done"]
    assert [marks[m] for m in chain] == sorted(marks[m] for m in chain)
    assert marks["first_audio_played"] < marks["llm_done"]  # speech started before the answer was complete
    assert len(timeline["sentences"]) == 3 and not timeline["interrupted"]
    windows = captured[: len(captured) // 4800 * 4800].reshape(-1, 4800)  # 100 ms at 48 kHz
    loud = (windows**2).mean(axis=1) > 10 ** (AUDIBLE_DBFS / 10)
    assert loud.sum() * 0.1 > 3.0  # seconds of audible answer on the speaker


def test_barge_in_stops_the_answer_and_answers_the_new_turn(
    pulse: PrivatePulse, server: RunningServer, models_dir: Path, tmp_path: Path
) -> None:
    never = threading.Event()
    first = espeak("Tell me a long story about the sea.", tmp_path / "first.wav")
    second = espeak("What is two plus two?", tmp_path / "second.wav")
    with BedrockStandIn() as bedrock:
        bedrock.queue(
            standin.Reply(deltas=["Once upon a time, a small boat left the harbour at dawn, and the sea was calm.",
                                  " The sailors sang as they rowed.", " Then the wind rose."],
                          hold_at=2, release=never, hold_timeout_s=240),
            standin.Reply(deltas=["Two plus two is four."]),
        )
        # no acoustic echo on a virtual microphone: let any speech through the gate (the gate has unit tests)
        chat = Chat(pulse, server, bedrock.url, models_dir, 2, tmp_path, VOICECLI_AUDIO__ECHO_MARGIN_DB="-60")
        chat.wait_for_stderr("listening on")
        recorder = pulse.record()
        pulse.play_into_mic(first)
        wait_audible(recorder)
        pulse.play_into_mic(second)  # talk over the answer
        chat.wait_for_stderr("barge-in")
        lines, timelines = chat.finish()
        never.set()
        recorder.stop()
    spoken = [turn.text for turn in lines if turn.origin == "spoken"]
    assert len(spoken) == 2 and "plus" in spoken[1].lower()
    assert timelines[0]["interrupted"] and not timelines[1]["interrupted"]
    answers = [turn.text for turn in lines if turn.event == "turn_finished"]
    assert "four" in answers[1].lower()
    stopped = [line for line in chat.stderr if "playback stopped" in line]
    assert stopped, chat.stderr
    print(stopped[0])  # the measured stop latency, for the record (shown with pytest -s)
    assert len(bedrock.requests) == 2
    history = bedrock.requests[1].body["messages"]
    assert history[1]["role"] == "assistant" and history[1]["content"][0]["text"].endswith("…")
