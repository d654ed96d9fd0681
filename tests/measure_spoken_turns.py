"""Timeline medians of spoken turns, bidi vs batch: espeak-ng prompts into the virtual microphone, the real local
STT, LLM and endpoint, answers played on the virtual speaker. A measurement, not a test (not collected by pytest).

Run: .venv/bin/python -m tests.measure_spoken_turns [--turns 10] [--out results/spoken-turns.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.pulse import PrivatePulse

PROMPTS = ["What is the capital of France?", "Name a large animal.", "What color is the sky?",
           "How many days are in a week?", "What is the tallest mountain?"]
MARKS = ["transcript_ready", "llm_first_token", "first_sentence_ready", "first_audio_byte", "first_audio_played",
         "llm_done", "turn_done"]


def run_mode(mode: str, turns: int, work: Path, pulse: PrivatePulse) -> list[dict[str, float]]:
    prompts = []
    for index, text in enumerate(PROMPTS):
        wav = work / f"p{index}.wav"
        subprocess.run(["espeak-ng", "-s", "120", "-w", str(wav), text], check=True)
        prompts.append(wav)
    process = subprocess.Popen(
        [sys.executable, "-m", "voicecli", "chat", "--no-tui", "--mode", mode, "--turns", str(turns)],
        env={**pulse.child_env(), "XDG_STATE_HOME": str(work / "state")}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None and process.stdout is not None
    for line in process.stderr:
        print(line.rstrip(), file=sys.stderr)
        if "listening on" in line:
            break
    results: list[dict[str, float]] = []
    for turn in range(turns):
        time.sleep(1.0)
        pulse.play_into_mic(prompts[turn % len(prompts)])
        while True:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError("voicecli exited early")
            if line.startswith("timeline "):
                results.append(json.loads(line[9:])["marks_ms"])
                print(f"{mode} turn {turn + 1}: {results[-1]}", file=sys.stderr)
                break
    process.wait(timeout=120)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("results/spoken-turns.json"))
    args = parser.parse_args()
    summary: dict[str, dict[str, float]] = {}
    with PrivatePulse() as pulse, tempfile.TemporaryDirectory() as tmp:
        for mode in ("bidi", "batch"):
            marks = run_mode(mode, args.turns, Path(tmp), pulse)
            summary[mode] = {m: statistics.median(t[m] for t in marks if m in t) for m in MARKS}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"turns_per_mode": args.turns, "median_ms_from_speech_end": summary}, indent=1))
    print("| mark (ms after end of speech) | bidi | batch |\n|---|---|---|")
    for mark in MARKS:
        print(f"| {mark} | {summary['bidi'][mark]:.0f} | {summary['batch'][mark]:.0f} |")


if __name__ == "__main__":
    main()
