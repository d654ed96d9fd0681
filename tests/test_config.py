"""Configuration layering: each precedence level wins over the one below it, and bad values are named clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicecli.config import Config, ConfigError, default_config_text, setting_key


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text('[tts]\nvoice = "am_michael"\nspeed = 1.2\n[endpoint.local]\nport = 9000\n', encoding="utf-8")
    return path


def test_defaults_come_from_the_shipped_file() -> None:
    config = Config.load(env={}, config_path=None)
    assert config.get_str("tts.voice") == "af_heart"
    assert config.setting("tts.voice").source == "default"
    assert "voice = \"af_heart\"" in default_config_text()


def test_every_default_key_is_documented_by_a_comment() -> None:
    lines = default_config_text().splitlines()
    for index, line in enumerate(lines):
        if "=" in line and not line.lstrip().startswith("#"):
            assert lines[index - 1].lstrip().startswith("#"), f"undocumented setting: {line}"


def test_user_file_overrides_defaults(user_file: Path) -> None:
    config = Config.load(config_path=user_file, env={})
    assert config.get_str("tts.voice") == "am_michael"
    assert config.get_float("tts.speed") == 1.2
    assert config.setting("tts.voice").source == f"file {user_file}"
    assert config.setting("tts.format").source == "default"


def test_env_overrides_file(user_file: Path) -> None:
    config = Config.load(config_path=user_file, env={"VOICECLI_TTS__VOICE": "bf_emma",
                                                    "VOICECLI_ENDPOINT__LOCAL__PORT": "9100"})
    assert config.get_str("tts.voice") == "bf_emma"
    assert config.get_int("endpoint.local.port") == 9100
    assert config.setting("endpoint.local.port").source == "env VOICECLI_ENDPOINT__LOCAL__PORT"
    assert config.get_float("tts.speed") == 1.2


def test_flags_override_env(user_file: Path) -> None:
    config = Config.load(config_path=user_file, env={"VOICECLI_TTS__VOICE": "bf_emma"},
                         flags={"tts.voice": "am_adam", "llm.backend": None})
    assert config.get_str("tts.voice") == "am_adam"
    assert config.setting("tts.voice").source == "flag"
    assert config.setting("llm.backend").source == "default"


def test_user_file_is_found_through_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "voicecli").mkdir()
    (tmp_path / "voicecli" / "config.toml").write_text('[llm]\nbackend = "bedrock"\n', encoding="utf-8")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert Config.load(env={}).get_str("llm.backend") == "bedrock"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[tts]\nspeed = 5.0\n', "tts.speed = 5.0"),
        ('[tts]\nspeed = "fast"\n', "expected a number"),
        ('[endpoint.local]\nport = 70000\n', "from 1 to 65535"),
        ('[llm]\nbackend = "gpt"\n', "one of 'local', 'bedrock', 'openai'"),
        ('[endpoint]\ntarget = "ftp://x"\n', "'local', 'sagemaker' or a ws://"),
        ('[tts]\nvoise = "af_heart"\n', "unknown setting 'tts.voise'"),
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
    assert Config.load(env={}).get_count("endpoint.local.workers") is None
    config_file = tmp_path / "c.toml"
    config_file.write_text("[endpoint.local]\nthreads = 2\n", encoding="utf-8")
    config = Config.load(config_file, env={"VOICECLI_ENDPOINT__LOCAL__WORKERS": "Auto"})
    assert config.get_count("endpoint.local.threads") == 2 and config.get_count("endpoint.local.workers") is None
    with pytest.raises(ConfigError, match=r"endpoint\.local\.workers.*'auto' or a whole number from 1 to 64"):
        Config.load(env={"VOICECLI_ENDPOINT__LOCAL__WORKERS": "0"})


def test_only_section_key_names_are_settings() -> None:
    """The project's own VOICECLI_* variables (container, tests) are not settings and must not stop the program."""
    others = {"VOICECLI_MODELS_DIR": "x", "VOICECLI_CUDA_COMPAT": "on", "VOICECLI_PYTHON": "/usr/bin/python3",
              "VOICECLI_ENTRYPOINT_DRY_RUN": "1", "VOICECLI_": ""}
    config = Config.load(env={**others, "VOICECLI_TTS__VOICE": "bf_emma"}, config_path=None)
    assert config.get_str("tts.voice") == "bf_emma"
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
