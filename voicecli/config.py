"""Layered configuration with provenance.

Why layered: the same app runs as a desk demo (flags), in CI (env), and for a user with a personal setup (their
file). Why provenance: when a setting surprises someone, `voicecli config show` must say which layer set it.

The shipped ``config/default.toml`` is both the documentation and the schema: every key lives there with its
default, and a value from any other layer must have the default's type and pass the constraint listed in
``CONSTRAINTS``. Precedence, lowest first: defaults < user file < ``VOICECLI_*`` environment < command-line flags.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from voicecli.paths import default_models_dir, default_state_dir, user_config_file

Value = str | int | float | bool

ENV_PREFIX = "VOICECLI_"
"""Environment overrides: VOICECLI_<SECTION>__<KEY>, double underscore between levels (VOICECLI_TTS__VOICE)."""
ENV_SEPARATOR = "__"
"""Only names with it after the prefix are settings. Other VOICECLI_* names belong to someone else (the container's
VOICECLI_CUDA_COMPAT and VOICECLI_PYTHON, a test's VOICECLI_MODELS_DIR) and are left alone."""

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A setting that cannot be used; the message names the key, where it came from, and what is allowed."""


@dataclass(frozen=True)
class Choice:
    """The value must be one of a fixed set."""

    options: tuple[str, ...]

    def check(self, value: Value) -> str | None:
        return None if value in self.options else f"one of {', '.join(repr(o) for o in self.options)}"


@dataclass(frozen=True)
class Range:
    """The number must lie within [low, high]."""

    low: float
    high: float

    def check(self, value: Value) -> str | None:
        assert isinstance(value, int | float)
        return None if self.low <= value <= self.high else f"a number from {self.low:g} to {self.high:g}"


@dataclass(frozen=True)
class EndpointTarget:
    """`local`, `sagemaker`, or a ws://, wss://, http:// or https:// URL."""

    def check(self, value: Value) -> str | None:
        text = str(value)
        if text in ("local", "sagemaker") or text.startswith(("ws://", "wss://", "http://", "https://")):
            return None
        return "'local', 'sagemaker' or a ws://, wss://, http:// or https:// URL"


@dataclass(frozen=True)
class AutoCount:
    """"auto" or a whole number within [low, high] (kept as text; read it with `Config.get_count`)."""

    low: int
    high: int

    def check(self, value: Value) -> str | None:
        text = str(value).strip().lower()
        if text == "auto" or (text.isdigit() and self.low <= int(text) <= self.high):
            return None
        return f"'auto' or a whole number from {self.low} to {self.high}"


Constraint = Choice | Range | EndpointTarget | AutoCount

CONSTRAINTS: dict[str, Constraint] = {
    "endpoint.target": EndpointTarget(),
    "endpoint.connect_timeout_s": Range(1, 600),
    "endpoint.local.port": Range(1, 65535),
    "endpoint.local.engine": Choice(("auto", "onnx", "torch")),
    "endpoint.local.workers": AutoCount(1, 64),
    "endpoint.local.threads": AutoCount(1, 64),
    "endpoint.local.max_batch": AutoCount(1, 64),
    "endpoint.local.max_sessions": Range(1, 10000),
    "endpoint.local.max_queued_requests": Range(1, 100000),
    "endpoint.local.idle_timeout_s": Range(0, 86400),
    "endpoint.sagemaker.transport": Choice(("bidi", "stream", "batch")),
    "llm.backend": Choice(("local", "bedrock", "openai")),
    "llm.max_tokens": Range(1, 8192),
    "llm.temperature": Range(0.0, 2.0),
    "llm.history_turns": Range(0, 100),
    "llm.local.threads": Range(1, 64),
    "llm.local.context_tokens": Range(256, 32768),
    "stt.beam_size": Range(1, 10),
    "stt.device": Choice(("cpu", "cuda", "auto")),
    "stt.compute_type": Choice(("int8", "int8_float16", "float16", "float32", "default")),
    "tts.speed": Range(0.5, 2.0),
    "tts.format": Choice(("mp3", "pcm16")),
    "tts.mode": Choice(("bidi", "batch")),
    "audio.input_mode": Choice(("vad", "push_to_talk")),
    "audio.vad_silence_ms": Range(100, 5000),
    "audio.speculate_ms": Range(50, 2000),
    "audio.turn_end_complete_ms": Range(100, 5000),
    "audio.turn_end_incomplete_ms": Range(100, 10000),
    "audio.block_frames": Range(64, 8192),
    "audio.output_latency_ms": Range(10, 1000),
    "audio.echo_margin_db": Range(-60, 60),
    "stt.threads": Range(1, 64),
    "stt.window_s": Range(0, 30),
    "segmentation.first_fragment_words": Range(0, 100),
    "segmentation.first_phrase_words": Range(0, 100),
    "segmentation.min_sentence_chars": Range(0, 200),
    "latency.window_turns": Range(1, 10000),
    "models.source": Choice(("auto", "hub", "registry")),
    "models.hub_probe_timeout_s": Range(0.5, 60),
}


@dataclass(frozen=True)
class Setting:
    """One effective value and the layer it came from (e.g. "default", "file /x/config.toml", "env VOICECLI_...")."""

    key: str
    value: Value
    source: str


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            yield from _flatten(value, key + ".")
        else:
            yield key, value


def _read_toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: not valid TOML: {exc}") from exc


def _type_name(value: Value) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[type(value)]


def _coerce(key: str, raw: Any, default: Value, origin: str) -> Value:
    """Give `raw` the type of the key's default, or raise a ConfigError naming key, origin and what is allowed."""
    value: Value
    if isinstance(default, bool):
        if isinstance(raw, bool):
            value = raw
        elif isinstance(raw, str) and raw.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            value = raw.strip().lower() in ("1", "true", "yes", "on")
        else:
            raise ConfigError(f"{key} = {raw!r} ({origin}): expected true or false")
    elif isinstance(default, int):
        try:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            value = int(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"{key} = {raw!r} ({origin}): expected {_type_name(default)}") from None
    elif isinstance(default, float):
        try:
            if isinstance(raw, bool):
                raise ValueError
            value = float(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"{key} = {raw!r} ({origin}): expected {_type_name(default)}") from None
    else:
        if isinstance(CONSTRAINTS.get(key), AutoCount) and isinstance(raw, int) and not isinstance(raw, bool):
            raw = str(raw)  # `threads = 2` in a TOML file
        if not isinstance(raw, str):
            raise ConfigError(f"{key} = {raw!r} ({origin}): expected a string")
        value = raw.strip().lower() if isinstance(CONSTRAINTS.get(key), AutoCount) else raw
    constraint = CONSTRAINTS.get(key)
    if constraint is not None:
        allowed = constraint.check(value)
        if allowed is not None:
            raise ConfigError(f"{key} = {raw!r} ({origin}): expected {allowed}")
    return value


def setting_key(env_name: str) -> str | None:
    """The dotted key an environment variable sets (VOICECLI_ENDPOINT__LOCAL__PORT -> endpoint.local.port), or None
    when the name is not a setting's: no VOICECLI_ prefix, or no double underscore after it (VOICECLI_PYTHON)."""
    if not env_name.startswith(ENV_PREFIX) or ENV_SEPARATOR not in env_name[len(ENV_PREFIX) :]:
        return None
    return env_name[len(ENV_PREFIX) :].lower().replace(ENV_SEPARATOR, ".")


def default_config_text() -> str:
    """The shipped defaults: config/default.toml, which voicecli/default.toml links to so that wheels carry it."""
    return resources.files("voicecli").joinpath("default.toml").read_text(encoding="utf-8")


class Config:
    """Effective settings, each remembering its source. Read with the typed getters (`get_str`, `get_int`, ...)."""

    def __init__(self, settings: Mapping[str, Setting]) -> None:
        self._settings = dict(settings)

    @classmethod
    def load(
        cls,
        config_path: Path | None = None,
        env: Mapping[str, str] | None = None,
        flags: Mapping[str, Value | None] | None = None,
    ) -> Config:
        """Build the effective configuration from all four layers.

        `config_path` replaces the user file (and must exist); `flags` maps dotted keys to values given on the
        command line (None means "flag not given").
        """
        defaults = dict(_flatten(_read_toml(default_config_text(), "config/default.toml")))
        settings = {key: Setting(key, value, "default") for key, value in defaults.items()}

        def apply(key: str, raw: Any, origin: str) -> None:
            if key not in defaults:
                raise ConfigError(f"unknown setting {key!r} ({origin}); see `voicecli config show` for valid keys")
            settings[key] = Setting(key, _coerce(key, raw, defaults[key], origin), origin)

        path = config_path if config_path is not None else user_config_file()
        if config_path is not None and not config_path.is_file():
            raise ConfigError(f"config file {config_path} does not exist")
        if path.is_file():
            origin = f"file {path}"
            for key, raw in _flatten(_read_toml(path.read_text(encoding="utf-8"), str(path))):
                apply(key, raw, origin)

        environ = os.environ if env is None else env
        for name, raw in sorted(environ.items()):
            env_key = setting_key(name)
            if env_key is not None:
                apply(env_key, raw, f"env {name}")
            elif name.startswith(ENV_PREFIX):
                log.debug("%s is not a setting (settings are %s<SECTION>%s<KEY>): ignored", name, ENV_PREFIX,
                          ENV_SEPARATOR)

        for key, raw in (flags or {}).items():
            if raw is not None:
                apply(key, raw, "flag")
        return cls(settings)

    def setting(self, key: str) -> Setting:
        return self._settings[key]

    def __iter__(self) -> Iterator[Setting]:
        return iter(self._settings.values())

    def get_str(self, key: str) -> str:
        value = self._settings[key].value
        assert isinstance(value, str), key
        return value

    def get_int(self, key: str) -> int:
        value = self._settings[key].value
        assert isinstance(value, int) and not isinstance(value, bool), key
        return value

    def get_count(self, key: str) -> int | None:
        """An `AutoCount` setting: None for "auto", else the number."""
        value = self.get_str(key)
        return None if value == "auto" else int(value)

    def get_float(self, key: str) -> float:
        value = self._settings[key].value
        assert isinstance(value, float), key
        return value

    def get_bool(self, key: str) -> bool:
        value = self._settings[key].value
        assert isinstance(value, bool), key
        return value

    @property
    def models_dir(self) -> Path:
        """Where models live: models.dir, or the XDG data directory."""
        configured = self.get_str("models.dir")
        return Path(configured).expanduser() if configured else default_models_dir()

    @property
    def latency_log_path(self) -> Path:
        configured = self.get_str("latency.log_path")
        return Path(configured).expanduser() if configured else default_state_dir() / "sessions.jsonl"
