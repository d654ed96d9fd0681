"""Layered configuration with provenance.

Why layered: the same app runs as a desk demo (flags), in CI (env), and for a user with a personal setup (their
file). Why provenance: when a setting surprises someone, `voicecli config show` must say which layer set it.

The shipped ``config/default.toml`` is both the documentation and the schema: every key lives there with its
default, and a value from any other layer must have the default's type and pass the constraint listed in
``CONSTRAINTS``. Precedence, lowest first: defaults < user file < ``VOICECLI_*`` environment < command-line flags.

Why typed sections: code reads ``config.tts.voice``, not ``config.get_str("tts.voice")``, so mypy checks every use
(a misspelled key is a type error, not a KeyError at run time). Each TOML table has one frozen dataclass below
(``[endpoint.local]`` is ``EndpointLocalSettings``, reached as ``config.endpoint.local``), built once from the
validated values; a test holds the dataclasses and ``config/default.toml`` key for key. Provenance stays per dotted
key (``config.setting("tts.voice").source``, iteration for `voicecli config show`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tomllib
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

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
    """"auto" or a whole number within [low, high] (kept as text for provenance; typed as None or the number)."""

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
    "llm.local.model": Choice(("smollm2", "gemma3-270m")),
    "llm.local.threads": Range(1, 64),
    "llm.local.history_turns": Range(0, 100),
    "llm.local.repeat_penalty": Range(1.0, 2.0),
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
    "audio.barge_in_ms": Range(0, 1000),
    "audio.barge_in_sure_ms": Range(0, 1000),
    "audio.barge_in_hold_ms": Range(0, 1000),
    "audio.partial_ms": Range(0, 10000),
    "audio.turn_end_complete_ms": Range(100, 5000),
    "audio.turn_end_incomplete_ms": Range(100, 10000),
    "audio.block_frames": Range(64, 8192),
    "audio.input_block_ms": Range(5, 100),
    "audio.output_latency_ms": Range(10, 1000),
    "audio.rebuffer_ms": Range(0, 2000),
    "audio.echo_margin_db": Range(-60, 60),
    "audio.echo": Choice(("aec", "gate", "off")),
    "turn.agree_ms": Range(100, 10000),
    "turn.one_signal_ms": Range(100, 10000),
    "turn.undecided_ms": Range(100, 10000),
    "turn.hold_ms": Range(100, 10000),
    "turn.max_ms": Range(100, 10000),
    "turn.complete_probability": Range(0.0, 1.0),
    "turn.incomplete_probability": Range(0.0, 1.0),
    "turn.words": Choice(("rules", "smollm2")),
    "turn.words_complete_probability": Range(0.0, 1.0),
    "turn.words_incomplete_probability": Range(0.0, 1.0),
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


@dataclass(frozen=True)
class EndpointLocalSettings:
    """[endpoint.local]: the Kokoro server on this machine (`voicecli serve`, and the one chat autostarts)."""

    host: str
    port: int
    engine: str
    workers: int | None
    """None: "auto" (the server sizes it)."""
    threads: int | None
    """None: "auto"."""
    max_batch: int | None
    """None: "auto"."""
    autostart: bool
    max_sessions: int
    max_queued_requests: int
    idle_timeout_s: float


@dataclass(frozen=True)
class EndpointSagemakerSettings:
    """[endpoint.sagemaker]: the SageMaker AI real-time endpoint profile."""

    name: str
    region: str
    profile: str
    transport: str
    endpoint_url: str


@dataclass(frozen=True)
class EndpointSettings:
    """[endpoint]: which TTS endpoint to use and how to reach it."""

    target: str
    connect_timeout_s: float
    token: str
    local: EndpointLocalSettings
    sagemaker: EndpointSagemakerSettings


@dataclass(frozen=True)
class LlmBedrockSettings:
    """[llm.bedrock]: the Bedrock backend's settings, taken as they are by `BedrockLLM`. Each [llm.*] section is
    its backend's only settings class: one typed path from the file to the backend, no copy to keep in step."""

    model_id: str
    region: str
    profile: str
    endpoint_url: str


@dataclass(frozen=True)
class LlmOpenaiSettings:
    """[llm.openai]: the OpenAI-compatible backend's settings, taken as they are by `OpenAICompatLLM`."""

    base_url: str
    model: str
    api_key_env: str


@dataclass(frozen=True)
class LlmLocalSettings:
    """[llm.local]: the embedded model's settings, taken as they are by `LocalLLM` (with the app's models
    directory, which is not an [llm] setting)."""

    model: str
    """The catalog model to load (voicecli/llm/local.py LOCAL_MODELS), unless model_file names a file."""
    model_file: str
    few_shot: bool
    """Show a chat model the built-in example turns (voicecli/llm/local.py FEW_SHOT); a base model always gets them."""
    history_turns: int
    """The embedded model's own bound on earlier exchanges kept as context (voicecli.llm.context_turns)."""
    repeat_penalty: float
    """llama.cpp's penalty on tokens seen in the last 64 of the context (1.0: none)."""
    threads: int
    context_tokens: int


@dataclass(frozen=True)
class LlmSettings:
    """[llm]: which LLM answers, and the sampling settings every backend shares; `create_llm` builds from it."""

    backend: str
    system_prompt: str
    max_tokens: int
    temperature: float
    history_turns: int
    bedrock: LlmBedrockSettings
    openai: LlmOpenaiSettings
    local: LlmLocalSettings


@dataclass(frozen=True)
class SttSettings:
    """[stt]: faster-whisper."""

    model: str
    beam_size: int
    device: str
    compute_type: str
    language: str
    threads: int
    window_s: float
    initial_prompt: str


@dataclass(frozen=True)
class TtsSettings:
    """[tts]: voice, speed, audio format and how answers reach the endpoint."""

    voice: str
    speed: float
    format: str
    mode: str


@dataclass(frozen=True)
class AudioSettings:
    """[audio]: devices, turn taking and the echo gate."""

    input_device: str
    output_device: str
    input_mode: str
    vad_silence_ms: int
    speculate_ms: int
    barge_in_ms: int
    """Speech that stops the assistant (a barge-in) before a turn could start (min speech 250 ms); 0 or >= 250:
    barge-in waits for the turn's start."""
    barge_in_sure_ms: int
    """Speech that stops the assistant sooner than barge_in_ms when the voice detector is sure of it (a voice heard
    clean, not the echo left over); 0, or not shorter than barge_in_ms: off."""
    barge_in_hold_ms: int
    """Speech that pauses the assistant's voice while the listener finds out whether it is a barge-in (resumed
    if it fades first); 0, or not shorter than the barge-in (or a turn's start, 250 ms): off."""
    partial_ms: int
    """Decode the growing utterance after every this much of it while the user speaks (0: off)."""
    speculative_answers: bool
    transcript_aware_turn_end: bool
    prosody_turn_end: bool
    turn_end_complete_ms: int
    turn_end_incomplete_ms: int
    echo: str
    """"aec" | "gate" | "off" (voicecli.audio.echo_cancel.ECHO_MODES); a legacy echo_gate = false reads as "off"."""
    echo_noise_suppression: bool
    echo_dump: str
    """A folder to write what the echo canceller is fed, block by block (voicecli.audio.echo_dump); "": off."""
    echo_double_talk: bool
    """With "aec": hold the answer's voice when the microphone holds more than its echo (voicecli.audio.double_talk),
    so a user talking over a loud answer is heard once the echo stops."""
    echo_leak_gate: bool
    """With "aec": mute the canceller's output while it is echo let through (coherent with the far end,
    voicecli.audio.echo_cancel.LEAK_COHERENCE), so the voice detector never hears it."""
    echo_gate: bool
    """Deprecated in favour of `echo`; kept so old config files still load."""
    echo_margin_db: float
    input_block_ms: int
    """The microphone's callback period: each block is stamped when its callback runs, so its length (and the
    buffering the sound server is asked for it) is latency on every turn start and barge-in."""
    output_latency_ms: int
    rebuffer_ms: int
    """After an answer runs dry mid-way, wait for this much of it before playing on (doubling); 0: never wait."""
    block_frames: int


@dataclass(frozen=True)
class TurnSettings:
    """[turn]: the end of turn from the words and the voice together (audio.prosody_turn_end = true).

    The thresholds of voicecli.listen.end_of_turn's policy, read once per pause: the silence after which the turn
    ends, chosen from the draft transcript's verdict and Smart Turn's probability. The defaults on the fields are the
    ones config/default.toml ships (a test holds them equal) so that the pure policy, its tests and `voicecli bench
    endpointing` sweep the same object the app is configured with.

    Why these defaults: the quickest setting at <= 2% cut-offs on the `endpointing` bench set (`holdout` is the
    check, never tuned on). They are slow, and that is the finding: on that set (Kokoro voices and espeak-ng, pauses
    of 400-1,500 ms, many after words that could end a sentence: "Play some music | by the Beatles") the draft
    transcript and Smart Turn v3.2 (p >= 0.5) each call ~30% of the hesitations finished, so answering at 200 ms when
    they agree cuts off 42% of them; the safe setting gains ~200 ms over silence alone (p50 1.37 s vs 1.58 s).
    """

    agree_ms: int = 1200
    """Silence that ends the turn when the text is complete AND prosody >= complete_probability."""
    one_signal_ms: int = 1500
    """When one signal says complete and the other is undecided (text unsure, or prosody in between)."""
    undecided_ms: int = 1500
    """When neither signal says complete nor unfinished."""
    hold_ms: int = 1600
    """When either signal hears an unfinished sentence (text incomplete, or prosody < incomplete_probability):
    a hesitation such as "the capital of ... Spain" is sat through."""
    max_ms: int = 1600
    """Any silence this long ends the turn, whatever the signals say (caps every other wait)."""
    complete_probability: float = 0.3
    """Prosody at or above this counts as "sounds finished" (Pipecat ends the turn at 0.5)."""
    incomplete_probability: float = 0.02
    """Prosody below this counts as "sounds unfinished"."""
    words: str = "smollm2"
    """Who says whether the draft's words are finished, for the text rule and the fused detector alike: "smollm2"
    (the local SmolLM2's probability that the message ends there, voicecli.listen.turn_likelihood, the rules'
    "unfinished" kept; the rules judge when it is not installed) or "rules" (voicecli.listen.turn_completion)."""
    words_complete_probability: float = 0.1
    """With words = "smollm2": at or above this the words are finished."""
    words_incomplete_probability: float = 0.03
    """With words = "smollm2": below this they are unfinished (in between: unsure)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.incomplete_probability <= self.complete_probability <= 1.0:
            raise ConfigError("turn.incomplete_probability must not exceed turn.complete_probability (both 0..1)")
        if not 0.0 <= self.words_incomplete_probability <= self.words_complete_probability <= 1.0:
            raise ConfigError("turn.words_incomplete_probability must not exceed turn.words_complete_probability "
                              "(both 0..1)")
        if min(self.agree_ms, self.one_signal_ms, self.undecided_ms, self.hold_ms, self.max_ms) <= 0:
            raise ConfigError("every [turn] wait must be positive")


@dataclass(frozen=True)
class SegmentationSettings:
    """[segmentation]: where answers are cut into sentences for TTS."""

    first_fragment_words: int
    first_phrase_words: int
    min_sentence_chars: int


@dataclass(frozen=True)
class LatencySettings:
    """[latency]: the session log and the percentile window."""

    log_path: str
    window_turns: int


@dataclass(frozen=True)
class ModelsSettings:
    """[models]: where models live and where they are fetched from."""

    dir: str
    source: str
    hub_probe_timeout_s: float


def _section_type(hint: Any) -> type[DataclassInstance] | None:
    """The dataclass a field's annotation names when that field is a nested table, else None."""
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def _build_section[S: DataclassInstance](cls: type[S], values: Mapping[str, Value], prefix: str) -> S:
    """One section's dataclass from the validated flat values; a nested dataclass field is the nested table.

    A field without a key, or whose annotation does not match the key's type, is a programming error that every
    config load would hit; the schema test (tests/test_config.py) also checks the reverse (a key without a field).
    """
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        key = f"{prefix}{field.name}"
        hint = hints[field.name]
        section = _section_type(hint)
        if section is not None:
            kwargs[field.name] = _build_section(section, values, key + ".")
            continue
        if key not in values:
            raise TypeError(f"{cls.__name__}.{field.name}: no setting {key!r} in config/default.toml")
        value: Value | None = values[key]
        if isinstance(CONSTRAINTS.get(key), AutoCount):
            value = None if value == "auto" else int(str(value))
            expected: Any = int | None
        else:
            expected = hint
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
            raise TypeError(f"{cls.__name__}.{field.name} is annotated {hint}, but {key} holds {value!r}")
        kwargs[field.name] = value
    return cls(**kwargs)


@dataclass(frozen=True)
class Config:
    """Effective settings as one frozen dataclass per TOML section, plus where each value came from.

    Build it with `Config.load` (tests too: pass `env={...}` or `flags={...}` for the values they need).
    """

    endpoint: EndpointSettings
    llm: LlmSettings
    stt: SttSettings
    tts: TtsSettings
    audio: AudioSettings
    turn: TurnSettings
    segmentation: SegmentationSettings
    latency: LatencySettings
    models: ModelsSettings
    sources: Mapping[str, Setting] = dataclasses.field(repr=False, compare=False)
    """Every dotted key's effective value and the layer that set it (provenance; read with `setting`)."""

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
        return cls._build(settings)

    @classmethod
    def defaults(cls) -> Config:
        """config/default.toml alone: for commands that must not read the user's file or environment (`config
        init` replaces a file that may be broken; `completion` reads no setting)."""
        defaults = _flatten(_read_toml(default_config_text(), "config/default.toml"))
        return cls._build({key: Setting(key, value, "default") for key, value in defaults})

    @classmethod
    def _build(cls, settings: Mapping[str, Setting]) -> Config:
        """The typed sections from validated values; the only place a Config is constructed."""
        settings = _legacy_echo_gate(settings)
        values = {key: setting.value for key, setting in settings.items()}
        hints = typing.get_type_hints(cls)
        sections: dict[str, Any] = {field.name: _build_section(section, values, field.name + ".")
                                    for field in dataclasses.fields(cls)
                                    if (section := _section_type(hints[field.name]))}
        return cls(**sections, sources=MappingProxyType(dict(settings)))

    def override(self, values: Mapping[str, Value], source: str) -> Config:
        """A copy with `values` (dotted keys) set, validated like any layer and reported as coming from `source`.

        For code that derives a configuration from the user's (the e2e bench pointing the LLM at its delay proxy).
        """
        settings = dict(self.sources)
        for key, raw in values.items():
            if key not in settings:
                raise ConfigError(f"unknown setting {key!r} ({source}); see `voicecli config show` for valid keys")
            settings[key] = Setting(key, _coerce(key, raw, settings[key].value, source), source)
        return self._build(settings)

    def setting(self, key: str) -> Setting:
        """A dotted key's value and source, for reports (`voicecli config show`, doctor); code reads the sections."""
        return self.sources[key]

    def __iter__(self) -> Iterator[Setting]:
        return iter(self.sources.values())

    @property
    def models_dir(self) -> Path:
        """Where models live: models.dir, or the XDG data directory."""
        configured = self.models.dir
        return Path(configured).expanduser() if configured else default_models_dir()

    @property
    def latency_log_path(self) -> Path:
        configured = self.latency.log_path
        return Path(configured).expanduser() if configured else default_state_dir() / "sessions.jsonl"


def _legacy_echo_gate(settings: Mapping[str, Setting]) -> Mapping[str, Setting]:
    """audio.echo_gate = false, set by the user while audio.echo is not, means what it always did: no gate, i.e.
    audio.echo = "off" (reported as coming from the echo_gate setting)."""
    gate, echo = settings.get("audio.echo_gate"), settings.get("audio.echo")
    if gate is None or echo is None or gate.value is not False or gate.source == "default" or echo.source != "default":
        return settings
    log.warning("audio.echo_gate is deprecated: use audio.echo = \"off\" (%s)", gate.source)
    return {**settings, "audio.echo": Setting("audio.echo", "off", f"{gate.source} (audio.echo_gate = false)")}


def settings_keys(cls: type[DataclassInstance] = Config, prefix: str = "") -> list[str]:
    """Every dotted key the dataclasses declare (for the schema test against config/default.toml)."""
    hints = typing.get_type_hints(cls)
    keys: list[str] = []
    for field in dataclasses.fields(cls):
        section = _section_type(hints[field.name])
        if section is not None:
            keys.extend(settings_keys(section, f"{prefix}{field.name}."))
        elif prefix:
            keys.append(f"{prefix}{field.name}")
    return keys
