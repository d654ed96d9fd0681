"""`voicecli doctor`: check everything a voice chat needs, and for each failure say how to fix it.

People run this first when something does not work, so every check is independent (one failure never hides the
others), quick (no model is loaded), and ends in a concrete next step.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from voicecli.config import Config
from voicecli.models.catalog import BY_NAME
from voicecli.models.install import status as model_status
from voicecli.wire.protocol import INVOCATIONS_PATH, PING_PATH, is_loopback_host


@dataclass(frozen=True)
class Check:
    """One line of the report. ok None means "not applicable" (shown, not counted as a failure)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""


def check_version() -> Check:
    from voicecli import __version__

    return Check("voicecli", True, f"{__version__} at {Path(__file__).parent}")


def check_python() -> Check:
    version = platform.python_version()
    ok = (3, 12) <= sys.version_info[:2] < (3, 13)
    return Check("python", ok, f"{version} at {sys.executable}",
                 "" if ok else "use Python 3.12 (`pyenv install 3.12 && pyenv local 3.12`, then recreate .venv)")


def check_packages() -> Check:
    """The chat's packages (what `scripts/setup` installs); the torch engine's are optional and only reported."""
    wanted = {"textual": "", "sounddevice": "", "faster_whisper": "", "boto3": "", "websockets": "",
              "miniaudio": "", "llama_cpp": "[local-llm]", "kokoro_onnx": "[endpoint]", "misaki": "[endpoint]",
              "lameenc": "[endpoint]"}
    optional = {"torch": "[torch]", "kokoro": "[torch]"}
    missing = {name: extra for name, extra in wanted.items() if importlib.util.find_spec(name) is None}
    absent = sorted(name for name in optional if importlib.util.find_spec(name) is None)
    torch_note = f"; torch engine not installed ({', '.join(absent)}: pip install -e '.[torch]')" if absent else ""
    if not missing:
        return Check("packages", True, f"{len(wanted)} runtime packages importable{torch_note}")
    extras = sorted({extra for extra in missing.values() if extra})
    fix = "pip install -e '.[offline]'" if extras else "pip install -e ."
    return Check("packages", False, "missing: " + ", ".join(sorted(missing)), fix)


def check_audio(config: Config) -> list[Check]:
    try:
        import sounddevice as sd
    except OSError as exc:
        return [Check("audio", False, f"PortAudio unavailable ({exc})",
                      "install PortAudio: `apt-get install libportaudio2` (and pulseaudio for a sound server)")]
    try:
        devices = sd.query_devices()
    except Exception as exc:  # PortAudio reports failures as a generic PortAudioError
        return [Check("audio", False, f"cannot list devices ({exc})", "start a sound server (PulseAudio/PipeWire)")]
    inputs = [d["name"] for d in devices if d["max_input_channels"] > 0]
    outputs = [d["name"] for d in devices if d["max_output_channels"] > 0]
    hint = ("no sound server? start PulseAudio (`pulseaudio --start`) or see README 'Troubleshooting' for a "
            "virtual device setup")
    result = [
        Check("microphone", bool(inputs), f"{len(inputs)} input device(s): {', '.join(inputs[:4])}" if inputs
              else "no input device: voice input is off, typed input still works", "" if inputs else hint),
        Check("speaker", bool(outputs), f"{len(outputs)} output device(s): {', '.join(outputs[:4])}" if outputs
              else "no output device: answers cannot be played (`--out` still saves them)", "" if outputs else hint),
    ]
    for key, wanted, pool in (("audio.input_device", config.audio.input_device, inputs),
                              ("audio.output_device", config.audio.output_device, outputs)):
        if wanted and not wanted.isdigit() and not any(wanted in name for name in pool):
            result.append(Check(key, False, f"{wanted!r} matches no device",
                                f"set {key} to one of: {', '.join(pool) or '(none)'}"))
    return result


def check_models(config: Config) -> list[Check]:
    from voicecli.models.install import needed, resolved_engine

    engine = resolved_engine(config.endpoint.local.engine)
    wanted = {spec.name for spec in needed(engine)}
    rows = []
    for row in model_status(config.models_dir):
        if not row.optional and row.name not in wanted and not row.installed:
            rows.append(Check(f"model {row.name}", None, f"not needed by the {engine} engine",
                              f"voicecli models install --only {row.name}"))
            continue
        if row.optional and not row.installed:
            rows.append(Check(f"model {row.name}", None, "optional, not installed",
                              f"voicecli models install --only {row.name}"))
            continue
        unusable = [m for m in BY_NAME[row.name].needs if importlib.util.find_spec(m) is None]
        if unusable and not row.installed:  # weights for an engine this install leaves out (the chat has no torch)
            rows.append(Check(f"model {row.name}", None, f"not installed, and its engine needs {', '.join(unusable)}",
                              "pip install -e '.[torch]', then voicecli models install"))
            continue
        rows.append(Check(f"model {row.name}", row.installed,
                          f"{row.size_bytes / 1e6:.0f} MB from {row.source}" if row.installed else "not installed",
                          "" if row.installed else f"voicecli models install --only {row.name}"))
    return rows


def check_endpoint(config: Config, timeout_s: float = 2.0) -> Check:
    target = config.endpoint.target
    if target == "sagemaker":
        name = config.endpoint.sagemaker.name
        return Check("endpoint", None, f"SageMaker endpoint {name!r} (checked with the AWS credentials below)")
    if target == "local":
        url = f"http://{config.endpoint.local.host}:{config.endpoint.local.port}{PING_PATH}"
    else:
        url = target.replace("ws://", "http://").replace("wss://", "https://").rstrip("/")
        url = url.split(INVOCATIONS_PATH)[0] + PING_PATH
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return Check("endpoint", True, f"{url} answered {response.status}")
    except urllib.error.HTTPError as exc:
        return Check("endpoint", False, f"{url} answered {exc.code} (still loading the model?)",
                     "wait for warm-up, then retry")
    except (urllib.error.URLError, OSError) as exc:
        autostart = target == "local" and config.endpoint.local.autostart
        return Check("endpoint", None if autostart else False,
                     f"{url} not answering ({getattr(exc, 'reason', exc)})"
                     + ("; `voicecli chat` starts it on demand" if autostart else ""),
                     "start it with `voicecli serve`" if not autostart else "")


def check_exposure(config: Config) -> Check:
    """Whether `voicecli serve` (and the autostarted server) would be open to the network without a token."""
    host = config.endpoint.local.host
    if is_loopback_host(host):
        return Check("endpoint exposure", True, f"the local server binds {host}: this machine only")
    if config.endpoint.token:
        return Check("endpoint exposure", True, f"the local server binds {host}, beyond loopback; a bearer token "
                     "is required")
    return Check("endpoint exposure", False,
                 f"the local server binds {host}, beyond loopback, with no token: anyone who can reach the port "
                 "can use it", "set endpoint.token (or the environment variable VOICECLI_ENDPOINT__TOKEN), or "
                 "endpoint.local.host = \"127.0.0.1\"")


def check_aws(config: Config) -> Check:
    uses_aws = config.llm.backend == "bedrock" or config.endpoint.target == "sagemaker"
    try:
        import boto3
        from botocore.exceptions import BotoCoreError

        profile = config.llm.bedrock.profile or None
        credentials = boto3.Session(profile_name=profile).get_credentials()
    except (ImportError, BotoCoreError) as exc:
        return Check("aws credentials", False if uses_aws else None, f"unavailable ({exc})",
                     "configure with `aws configure` or set AWS_PROFILE")
    if credentials is None:
        return Check("aws credentials", False if uses_aws else None,
                     "none found" + ("" if uses_aws else " (not needed: no AWS backend configured)"),
                     "configure with `aws configure`, AWS_PROFILE, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
    return Check("aws credentials", True, f"found ({credentials.method})")


def check_sound_server() -> Check:
    server = os.environ.get("PULSE_SERVER") or os.environ.get("XDG_RUNTIME_DIR")
    return Check("sound server env", None, f"PULSE_SERVER/XDG_RUNTIME_DIR = {server}" if server else "not set")


def check_echo(config: Config) -> Check:
    """Which defence against the assistant's own voice the chat uses (audio.echo), and whether AEC can run."""
    from voicecli.audio.echo_cancel import binding_status

    mode, source = config.audio.echo, config.setting("audio.echo").source
    if mode == "gate":
        return Check("echo", None, f"level gate: barge-in needs {config.audio.echo_margin_db:g} dB over the playback "
                     f"(audio.echo = \"gate\", {source})")
    if mode == "off":
        return Check("echo", None, f"off: the raw microphone, fine with headphones (audio.echo = \"off\", {source})")
    ok, detail = binding_status()
    if ok:
        leaks = ("echo it lets through muted" if config.audio.echo_leak_gate else
                 "echo it lets through not muted (audio.echo_leak_gate = false)")
        under = ("a voice under the echo holds the answer" if config.audio.echo_double_talk else
                 "a voice under the echo holds nothing (audio.echo_double_talk = false)")
        return Check("echo", True, f"echo cancellation active: {detail}; the level gate only while the echo delay "
                     f"cannot be estimated; {leaks}; {under}")
    return Check("echo", False, f"audio.echo = \"aec\", but the level gate is used: {detail}",
                 "reinstall with scripts/setup (it installs pywebrtc-audio), or set audio.echo = \"gate\"")


def check_turn_end(config: Config) -> Check:
    """Who judges whether the user's words are finished (turn.words), and whether that judge can run."""
    from voicecli.listen.turn_likelihood import TurnModelMissing, turn_model_path

    source = config.setting("turn.words").source
    if config.turn.words == "rules":
        return Check("end of turn", None, f"the word rules judge the words (turn.words = \"rules\", {source})")
    try:
        path = turn_model_path(config.models_dir)
    except TurnModelMissing:
        return Check("end of turn", False, "turn.words = \"smollm2\", but SmolLM2 is not installed: the word rules "
                     "judge instead", "voicecli models install --only smollm2, or set turn.words = \"rules\"")
    return Check("end of turn", True, f"SmolLM2 judges the words ({path}; turn.words = \"smollm2\", {source})")


def run_checks(config: Config) -> list[Check]:
    steps: list[Callable[[], Check | list[Check]]] = [
        check_version, check_python, check_packages, lambda: check_audio(config), lambda: check_models(config),
        lambda: check_endpoint(config), lambda: check_exposure(config), lambda: check_aws(config),
        check_sound_server, lambda: check_echo(config), lambda: check_turn_end(config),
    ]
    checks: list[Check] = []
    for step in steps:
        try:
            result = step()
        except Exception as exc:  # a broken check must not hide the others
            result = Check(getattr(step, "__name__", "check"), False, f"check crashed: {exc!r}")
        checks.extend(result if isinstance(result, list) else [result])
    return checks


def render(checks: list[Check]) -> str:
    mark = {True: "ok  ", False: "FAIL", None: "--  "}
    lines = []
    for check in checks:
        lines.append(f"[{mark[check.ok]}] {check.name}: {check.detail}")
        if check.fix and check.ok is not True:
            lines.append(f"         fix: {check.fix}")
    failed = sum(1 for c in checks if c.ok is False)
    lines.append(f"{failed} problem(s) found" if failed else "all checks passed")
    return "\n".join(lines)
