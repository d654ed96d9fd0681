"""`voicecli bench`: the AWS post's batch-vs-bidi latency study, repeatable, on voicecli's own code.

    voicecli bench tts  [--runs N] [--rtt-ms X ...]          TTS only: time to first audio per transport variant
    voicecli bench e2e  [--runs N] [--rtt-ms X ...]          LLM + TTS through the pipeline: batch vs bidi
    voicecli bench load [--sessions N,...] [--sentences M]   concurrent sessions with exact accounting
    voicecli bench turns [--turns N] [--modes bidi,batch]    spoken questions in, felt latency from the audio
    voicecli bench questions --set quality --out DIR         voice a built-in question set into WAVs + manifest
    voicecli bench stt  [--set quality] [--variants ...]     speech recognition: word errors vs decode time
    voicecli bench llm  [--set quality] [--variants ...]     offline LLM: answers right vs time to first sentence
    voicecli bench endpointing [--detectors ...]             end of turn: wait vs cut-off rate per detector
    voicecli bench duplex [--modes aec,gate,off] [--turns N] the answer's echo in the microphone: false barge-ins

Each writes results.json, results.md and PNG charts to results/bench/<name>/ and copies them to
results/bench/latest/<bench>/. The bench modules (transports, numpy, matplotlib, the engine) are imported only
when a bench runs, so `voicecli --help` stays fast. Without matplotlib (the optional `bench` extra) a bench says so
before it starts and writes everything but the charts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from voicecli.config import Config

DEFAULT_OUT = Path("results") / "bench"
TTS_RUNS = 5
"""Enough for a stable median of each variant in ~3 minutes on 2 shared CPU cores (synthesis dominates)."""
E2E_RUNS = 5
LOAD_SESSIONS = "1,2,4,8"
LOAD_SENTENCES = 10
LOAD_RUNS = 2
TURNS = 10
"""Turns per mode on the 8-question latency set (the README's turn figures)."""
TURN_MODES = "bidi,batch"
DUPLEX_MODES = "aec,gate,off"
DUPLEX_TURNS = 6
"""Turns per mode and echo level: 3 echo-only answers and 3 interrupted ones."""
DUPLEX_ECHO_DB = "0,6"
"""The echo as loud as the user's voice, and 6 dB louder."""
DUPLEX_DELAY_MS = "40,80,120"


def _note_missing_charts() -> None:
    """Every bench draws charts at its end, after minutes of work: say now, in one line, if they will be skipped."""
    from voicecli.bench.charts import missing_note

    note = missing_note()
    if note is not None:
        print(note, file=sys.stderr)


def _run_tts(args: argparse.Namespace, config: Config) -> int:
    _note_missing_charts()
    from voicecli.bench.tts import run

    return run(args, config)


def _run_e2e(args: argparse.Namespace, config: Config) -> int:
    _note_missing_charts()
    from voicecli.bench.e2e import run

    return run(args, config)


def _run_load(args: argparse.Namespace, config: Config) -> int:
    _note_missing_charts()
    from voicecli.bench.load import run

    return run(args, config)


def _run_turns(args: argparse.Namespace, config: Config) -> int:
    _note_missing_charts()
    from voicecli.bench.turns import run

    return run(args, config)


def _run_questions(args: argparse.Namespace, config: Config) -> int:
    from voicecli.bench.questions import run

    return run(args, config)


def _run_stt(args: argparse.Namespace, config: Config) -> int:
    _note_missing_charts()
    from voicecli.bench.stt import run

    return run(args, config)


def _run_llm(args: argparse.Namespace, config: Config) -> int:
    _note_missing_charts()
    from voicecli.bench.llm import run

    return run(args, config)


def _run_endpointing(args: argparse.Namespace, config: Config) -> int:
    _note_missing_charts()
    from voicecli.bench.endpointing import run

    return run(args, config)


def _run_duplex(args: argparse.Namespace, config: Config) -> int:
    _note_missing_charts()
    from voicecli.bench.duplex import run

    return run(args, config)


def _question_source(parser: argparse.ArgumentParser, default_set: str) -> None:
    """`--set NAME` (a built-in set, voicecli/bench/question_sets.py) or `--questions DIR` (WAVs + manifest)."""
    from voicecli.bench.question_sets import SETS

    source = parser.add_mutually_exclusive_group()
    source.add_argument("--set", dest="question_set", choices=tuple(SETS), default=None,
                        help=f"a built-in question set (default {default_set}): latency (8 espeak questions, the "
                        "felt-latency set), quality (36 factual questions voiced by Kokoro voices and espeak-ng, "
                        "tuned on) or holdout (20 more, never tuned on)")
    source.add_argument("--questions", default=None, metavar="DIR",
                        help="a folder of WAV files, one question each, optionally with a questions.json manifest "
                        "of what each says and which answers are right (`voicecli bench questions` writes one)")
    parser.set_defaults(default_set=default_set)


def _outputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help=f"results root (default {DEFAULT_OUT}); each run goes to DIR/NAME/ and DIR/latest/")
    parser.add_argument("--name", default=None, help="name of this run's folder (default <bench>-<timestamp>)")


def _rtt(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rtt-ms", action="append", metavar="MS",
                        help="inject this round-trip time with a delaying proxy in front of the endpoint; "
                        "repeatable or a comma list, e.g. --rtt-ms 0,50 (default 0)")


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Add the sub-commands (`tts`, `e2e`, `load`, `turns`, `questions`, `stt`, `llm`, `endpointing`, `duplex`)
    to the `voicecli bench` parser.

    `common` is the CLI's parent parser of global options, passed in so that bench never imports the CLI.
    """
    commands = parser.add_subparsers(dest="bench_command", metavar="BENCH", required=True)

    text = "TTS only: batch vs bidi time to first audio (the post's 329 -> 157 ms study)"
    tts = commands.add_parser("tts", parents=[common], help=text, description=text)
    tts.add_argument("--runs", type=int, default=TTS_RUNS,
                     help=f"runs per variant and RTT (default {TTS_RUNS}: a stable median in ~3 min on 2 CPU cores)")
    _rtt(tts)
    tts.add_argument("--texts", choices=("paragraph", "quick"), default="paragraph",
                     help="paragraph (5 sentences, the study) or quick (3 short ones, a smoke run)")
    tts.add_argument("--no-floor", action="store_true",
                     help="skip the in-process floor (it loads the engine here, so needs the models on this machine)")
    _outputs(tts)
    tts.set_defaults(handler=_run_tts)

    text = "LLM + TTS end to end: batch vs bidi through the real pipeline"
    e2e = commands.add_parser("e2e", parents=[common], help=text, description=text)
    e2e.add_argument("--runs", type=int, default=E2E_RUNS,
                     help=f"turns per mode and RTT (default {E2E_RUNS}; the prompts cycle)")
    _rtt(e2e)
    e2e.add_argument("--prompt", action="append", metavar="TEXT",
                     help="a prompt to ask (repeatable; default: three fixed questions)")
    _outputs(e2e)
    e2e.set_defaults(handler=_run_e2e)

    text = "N concurrent WebSocket sessions pipelining M sentences each, with exact accounting"
    load = commands.add_parser("load", parents=[common], help=text, description=text)
    load.add_argument("--sessions", action="append", metavar="N",
                      help=f"concurrent sessions: repeatable or a comma list (default {LOAD_SESSIONS})")
    load.add_argument("--sentences", type=int, default=LOAD_SENTENCES,
                      help=f"sentences each session pipelines (default {LOAD_SENTENCES})")
    load.add_argument("--runs", type=int, default=LOAD_RUNS, help=f"rounds per N (default {LOAD_RUNS})")
    _outputs(load)
    load.set_defaults(handler=_run_load)

    text = "spoken questions into a virtual microphone, the real app answering: felt latency from the audio"
    turns = commands.add_parser("turns", parents=[common], help=text, description=text)
    turns.add_argument("--turns", type=int, default=None,
                       help=f"questions per mode, cycling through the set (default: every question once; {TURNS} "
                       "for the latency set)")
    turns.add_argument("--modes", default=TURN_MODES, metavar="M,M",
                       help=f"modes to run, one after the other (default {TURN_MODES})")
    turns.add_argument("--echo", default=None, metavar="E,E",
                       help="audio.echo values (aec, gate, off) to compare: each mode runs once per value "
                       "(variants named mode+echo); default: the configured one")
    turns.add_argument("--rounds", type=int, default=1, metavar="N",
                       help="alternate the variants in N rounds (A B, B A, ...), each round asking the next slice of "
                       "the questions, so a machine whose speed drifts slows them alike (default 1: one after the "
                       "other)")
    _question_source(turns, "latency")
    _outputs(turns)
    turns.set_defaults(handler=_run_turns)

    text = "voice a built-in question set (Kokoro voices through the endpoint, espeak-ng) into WAVs + questions.json"
    questions = commands.add_parser("questions", parents=[common], help=text, description=text)
    from voicecli.bench.question_sets import SETS

    questions.add_argument("--set", dest="question_set", choices=tuple(SETS), required=True,
                           help="which built-in set to voice")
    questions.add_argument("--out", required=True, metavar="DIR",
                           help="folder to write the WAVs and questions.json into (usable as --questions DIR)")
    questions.set_defaults(handler=_run_questions)

    text = "speech recognition on spoken questions: word errors vs decode time, per model and option, side by side"
    stt = commands.add_parser("stt", parents=[common], help=text, description=text)
    _question_source(stt, "quality")
    stt.add_argument("--variants", default=None, metavar="V,V",
                     help="STT variants to compare (default: all that are installed; see voicecli/bench/stt.py)")
    _outputs(stt)
    stt.set_defaults(handler=_run_stt)

    text = "the offline LLM on the questions' text: answers right vs time to first token and sentence, side by side"
    llm = commands.add_parser("llm", parents=[common], help=text, description=text)
    _question_source(llm, "quality")
    llm.add_argument("--variants", default=None, metavar="V,V",
                     help="LLM variants to compare (default: all whose model is installed; see voicecli/bench/llm.py)")
    _outputs(llm)
    llm.set_defaults(handler=_run_llm)

    text = "end-of-turn detectors on labelled pauses: the wait at real ends vs the rate of cutting speakers off"
    endpointing = commands.add_parser("endpointing", parents=[common], help=text, description=text)
    _question_source(endpointing, "endpointing")
    endpointing.add_argument("--detectors", default=None, metavar="D,D",
                             help="detectors to compare (default: all: silence, text, lm, prosody, fused)")
    _outputs(endpointing)
    endpointing.set_defaults(handler=_run_endpointing)

    text = ("the answer's echo through a room into the microphone: false barge-ins, barge-in detection time, ERLE, "
            "history after a barge-in, per echo mode")
    duplex = commands.add_parser("duplex", parents=[common], help=text, description=text)
    duplex.add_argument("--modes", default=DUPLEX_MODES, metavar="M,M",
                        help=f"echo handling to compare, one after the other: aec, gate, off (default {DUPLEX_MODES})")
    duplex.add_argument("--turns", type=int, default=DUPLEX_TURNS,
                        help=f"turns per mode, delay and echo level, echo-only and interrupted in turn (default "
                        f"{DUPLEX_TURNS})")
    duplex.add_argument("--echo-gains", default=DUPLEX_ECHO_DB, metavar="DB,DB",
                        help=f"the echo's level over the user's voice in dB, each a run of --turns (default "
                        f"{DUPLEX_ECHO_DB})")
    duplex.add_argument("--delay-ms", default=DUPLEX_DELAY_MS, metavar="MS,MS",
                        help=f"the echo's delays after the speaker, an app session each (default {DUPLEX_DELAY_MS}; "
                        "the echo path's own ~30 ms is the least it can do)")
    duplex.add_argument("--seed", type=int, default=0, help="seed of the room and of the interruption times")
    duplex.add_argument("--keep-audio", default=None, metavar="DIR",
                        help="save each app session's microphone and speaker recordings to DIR (one .npz each, ~3 MB "
                        "a minute) to replay the echo canceller on them offline: scripts/duplex_replay.py; and, "
                        "with the canceller, what it was fed live (audio.echo_dump) in <mode>-<delay>ms/ there")
    duplex.add_argument("--app-log", default=None, metavar="DIR",
                        help="keep each app session's log at info level in DIR (<mode>-<delay>ms.log; each turn's "
                        "played_at_wall in results.json is the same clock)")
    _outputs(duplex)
    duplex.set_defaults(handler=_run_duplex)
