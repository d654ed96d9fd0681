"""Configuration layering: each precedence level wins over the one below it, and bad values are named clearly."""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from pathlib import Path

import pytest

from voicecli.config import (
    CONSTRAINTS,
    AutoCount,
    Config,
    ConfigError,
    default_config_text,
    setting_key,
    settings_keys,
)


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text('[tts]\nvoice = "am_michael"\nspeed = 1.2\n[endpoint.local]\nport = 9000\n', encoding="utf-8")
    return path


def test_defaults_come_from_the_shipped_file() -> None:
    config = Config.load(env={}, config_path=None)
    assert config.tts.voice == "af_heart"
    assert config.setting("tts.voice").source == "default"
    assert "voice = \"af_heart\"" in default_config_text()


def test_every_default_key_is_documented_by_a_comment() -> None:
    lines = default_config_text().splitlines()
    for index, line in enumerate(lines):
        if "=" in line and not line.lstrip().startswith("#"):
            assert lines[index - 1].lstrip().startswith("#"), f"undocumented setting: {line}"


def test_user_file_overrides_defaults(user_file: Path) -> None:
    config = Config.load(config_path=user_file, env={})
    assert config.tts.voice == "am_michael"
    assert config.tts.speed == 1.2
    assert config.setting("tts.voice").source == f"file {user_file}"
    assert config.setting("tts.format").source == "default"


def test_env_overrides_file(user_file: Path) -> None:
    config = Config.load(config_path=user_file, env={"VOICECLI_TTS__VOICE": "bf_emma",
                                                    "VOICECLI_ENDPOINT__LOCAL__PORT": "9100"})
    assert config.tts.voice == "bf_emma"
    assert config.endpoint.local.port == 9100
    assert config.setting("endpoint.local.port").source == "env VOICECLI_ENDPOINT__LOCAL__PORT"
    assert config.tts.speed == 1.2


def test_flags_override_env(user_file: Path) -> None:
    config = Config.load(config_path=user_file, env={"VOICECLI_TTS__VOICE": "bf_emma"},
                         flags={"tts.voice": "am_adam", "llm.backend": None})
    assert config.tts.voice == "am_adam"
    assert config.setting("tts.voice").source == "flag"
    assert config.setting("llm.backend").source == "default"


def test_user_file_is_found_through_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "voicecli").mkdir()
    (tmp_path / "voicecli" / "config.toml").write_text('[llm]\nbackend = "bedrock"\n', encoding="utf-8")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert Config.load(env={}).llm.backend == "bedrock"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[tts]\nspeed = 5.0\n', "tts.speed = 5.0"),
        ('[tts]\nspeed = "fast"\n', "expected a number"),
        ('[endpoint.local]\nport = 70000\n', "from 1 to 65535"),
        ('[llm]\nbackend = "gpt"\n', "one of 'local', 'bedrock', 'openai'"),
        ('[endpoint]\ntarget = "ftp://x"\n', "'local', 'sagemaker' or a ws://"),
        ('[tts]\nvoise = "af_heart"\n', "unknown setting 'tts.voise'"),
        ('[llm.bedrock]\nmodelid = "x"\n', "unknown setting 'llm.bedrock.modelid'"),
        ('[audio]\necho_gate = "maybe"\n', "expected true or false"),
        ('[tts\n', "not valid TOML"),
    ],
)
def test_bad_value_names_key_file_and_allowed(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        Config.load(config_path=path, env={})
    assert needle in str(caught.value)
    assert str(path) in str(caught.value)


def test_bad_env_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="VOICECLI_STT__BEAM_SIZE"):
        Config.load(env={"VOICECLI_STT__BEAM_SIZE": "zero"})


def test_missing_explicit_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Config.load(config_path=tmp_path / "nope.toml", env={})


def test_models_dir_defaults_to_xdg_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert Config.load(env={}).models_dir == tmp_path / "voicecli" / "models"


def test_worker_and_thread_counts_take_auto_or_a_number(tmp_path: Path) -> None:
    assert Config.load(env={}).endpoint.local.workers is None
    config_file = tmp_path / "c.toml"
    config_file.write_text("[endpoint.local]\nthreads = 2\n", encoding="utf-8")
    config = Config.load(config_file, env={"VOICECLI_ENDPOINT__LOCAL__WORKERS": "Auto"})
    assert config.endpoint.local.threads == 2 and config.endpoint.local.workers is None
    with pytest.raises(ConfigError, match=r"endpoint\.local\.workers.*'auto' or a whole number from 1 to 64"):
        Config.load(env={"VOICECLI_ENDPOINT__LOCAL__WORKERS": "0"})


def _default_keys() -> set[str]:
    def walk(table: dict[str, object], prefix: str) -> set[str]:
        keys: set[str] = set()
        for name, value in table.items():
            keys |= walk(value, f"{prefix}{name}.") if isinstance(value, dict) else {f"{prefix}{name}"}
        return keys

    return walk(tomllib.loads(default_config_text()), "")


def test_every_default_key_has_a_typed_field_and_every_field_a_key() -> None:
    fields = settings_keys()
    assert len(fields) == len(set(fields))
    assert set(fields) == _default_keys()


def test_each_section_is_a_frozen_dataclass_holding_the_effective_values(user_file: Path) -> None:
    config = Config.load(config_path=user_file, env={"VOICECLI_AUDIO__ECHO_GATE": "off"})
    for key in _default_keys():
        value: object = config
        for part in key.split("."):
            value = getattr(value, part)
        raw = config.setting(key).value
        if isinstance(CONSTRAINTS.get(key), AutoCount):  # "auto" or a count, kept as text for provenance
            raw = None if raw == "auto" else int(raw)
        assert value == raw and type(value) is type(raw), key
    assert config.tts.speed == 1.2 and config.endpoint.local.port == 9000 and config.audio.echo_gate is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.tts.voice = "x"  # type: ignore[misc]
    hints = typing.get_type_hints(type(config.audio))
    assert hints["vad_silence_ms"] is int and hints["echo_gate"] is bool and hints["echo_margin_db"] is float


def test_override_validates_and_reports_its_source() -> None:
    config = Config.load(env={}, config_path=None).override({"tts.speed": "1.5", "endpoint.local.threads": 3},
                                                             "bench delay proxy")
    assert config.tts.speed == 1.5 and config.endpoint.local.threads == 3
    assert config.setting("tts.speed").source == "bench delay proxy"
    assert config.setting("tts.voice").source == "default"
    with pytest.raises(ConfigError, match=r"tts\.speed = 9 \(x\): expected a number from 0.5 to 2"):
        config.override({"tts.speed": 9}, "x")
    with pytest.raises(ConfigError, match=r"unknown setting 'tts\.voise'"):
        config.override({"tts.voise": "af_heart"}, "x")


def test_only_section_key_names_are_settings() -> None:
    """The project's own VOICECLI_* variables (container, tests) are not settings and must not stop the program."""
    others = {"VOICECLI_MODELS_DIR": "x", "VOICECLI_CUDA_COMPAT": "on", "VOICECLI_PYTHON": "/usr/bin/python3",
              "VOICECLI_ENTRYPOINT_DRY_RUN": "1", "VOICECLI_": ""}
    config = Config.load(env={**others, "VOICECLI_TTS__VOICE": "bf_emma"}, config_path=None)
    assert config.tts.voice == "bf_emma"
    assert all(s.source in ("default", "env VOICECLI_TTS__VOICE") for s in config)


def test_a_misspelt_setting_name_is_still_refused() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting 'tts.voise' \(env VOICECLI_TTS__VOISE\)"):
        Config.load(env={"VOICECLI_TTS__VOISE": "bf_emma"}, config_path=None)


@pytest.mark.parametrize(("name", "key"), [
    ("VOICECLI_ENDPOINT__LOCAL__PORT", "endpoint.local.port"),
    ("VOICECLI_TTS__VOICE", "tts.voice"),
    ("VOICECLI_MODELS_DIR", None),
    ("VOICECLI_CUDA_COMPAT", None),
    ("OTHER__X", None),
])
def test_setting_key_of_an_environment_name(name: str, key: str | None) -> None:
    assert setting_key(name) == key
