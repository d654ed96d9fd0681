"""`voicecli bench`: the AWS post's batch-vs-bidi latency study, repeatable, on voicecli's own code.

    voicecli bench tts  [--runs N] [--rtt-ms X ...]          TTS only: time to first audio per transport variant
    voicecli bench e2e  [--runs N] [--rtt-ms X ...]          LLM + TTS through the pipeline: batch vs bidi
    voicecli bench load [--sessions N,...] [--sentences M]   concurrent sessions with exact accounting
    voicecli bench turns [--turns N] [--modes bidi,batch]    spoken questions in, felt latency from the audio

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
TURN_MODES = "bidi,batch"


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


def _outputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help=f"results root (default {DEFAULT_OUT}); each run goes to DIR/NAME/ and DIR/latest/")
    parser.add_argument("--name", default=None, help="name of this run's folder (default <bench>-<timestamp>)")


def _rtt(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rtt-ms", action="append", metavar="MS",
                        help="inject this round-trip time with a delaying proxy in front of the endpoint; "
                        "repeatable or a comma list, e.g. --rtt-ms 0,50 (default 0)")


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Add the `tts`, `e2e`, `load` and `turns` sub-commands to the `voicecli bench` parser.

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
    turns.add_argument("--turns", type=int, default=TURNS, help=f"questions per mode (default {TURNS}; they cycle)")
    turns.add_argument("--modes", default=TURN_MODES, metavar="M,M",
                       help=f"modes to run, one after the other (default {TURN_MODES})")
    turns.add_argument("--questions", default=None, metavar="DIR",
                       help="a folder of WAV files, one question each (default: a built-in set spoken by espeak-ng, "
                       "some with a 400-600 ms pause mid-sentence)")
    _outputs(turns)
    turns.set_defaults(handler=_run_turns)
