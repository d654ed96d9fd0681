"""The command line as a user meets it: help everywhere, one-line errors with exit status 2, provenance shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from voicecli.cli import build_parser


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicecli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, check=False)


@pytest.mark.parametrize("command", [[], ["chat"], ["models"], ["models", "install"], ["models", "list"],
                                     ["config"], ["config", "show"], ["config", "init"], ["doctor"], ["serve"],
                                     ["completion"]])
def test_every_command_has_help(command: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*command, "--help"])
    assert exited.value.code == 0


def test_global_options_work_before_and_after_the_command() -> None:
    parser = build_parser()
    assert parser.parse_args(["--llm", "bedrock", "config", "show"]).llm == "bedrock"
    assert parser.parse_args(["config", "show", "--llm", "bedrock"]).llm == "bedrock"


def test_config_show_reports_provenance(tmp_path: Path) -> None:
    user = tmp_path / "c.toml"
    user.write_text('[tts]\nvoice = "bf_emma"\n', encoding="utf-8")
    result = run_cli("--config", str(user), "--llm", "openai", "config", "show",
                     env={"VOICECLI_TTS__SPEED": "1.5"})
    assert result.returncode == 0, result.stderr
    lines = {line.split("=")[0].strip(): line for line in result.stdout.splitlines()}
    assert f"# file {user}" in lines["tts.voice"]
    assert "# env VOICECLI_TTS__SPEED" in lines["tts.speed"]
    assert "# flag" in lines["llm.backend"] and "'openai'" in lines["llm.backend"]
    assert "# default" in lines["tts.format"]


def test_bad_value_is_one_line_and_exit_2() -> None:
    result = run_cli("config", "show", env={"VOICECLI_TTS__SPEED": "9"})
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "tts.speed" in result.stderr and "VOICECLI_TTS__SPEED" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_model_name_is_rejected() -> None:
    result = run_cli("models", "install", "--only", "gpt5")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_doctor_reports_every_check_with_fixes(tmp_path: Path) -> None:
    result = run_cli("doctor", "--models-dir", str(tmp_path / "empty"), env={"VOICECLI_ENDPOINT__LOCAL__PORT": "9"})
    assert result.returncode == 1  # the models are missing from the empty directory
    for name in ("python", "packages", "model kokoro", "endpoint", "aws credentials"):
        assert f"] {name}" in result.stdout
    assert "fix: voicecli models install --only kokoro" in result.stdout


def test_demo_help_says_how_the_race_is_kept_fair(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["demo", "--help"])
    assert exited.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "generated ONCE, live, on the batch path" in shown and "replayed at the same times" in shown
    assert "not in parallel" in shown and "--question" in shown and "--out-dir" in shown


def test_version_comes_from_the_package() -> None:
    import importlib.metadata

    from voicecli import __version__

    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"voicecli {__version__}"
    assert importlib.metadata.version("voicecli") == __version__  # the metadata reads the same attribute


def test_doctor_runs_with_the_projects_own_variables(tmp_path: Path) -> None:
    """VOICECLI_MODELS_DIR (the tests'), VOICECLI_CUDA_COMPAT (the container's) are not settings: no exit 2."""
    from voicecli import __version__

    result = run_cli("doctor", "--models-dir", str(tmp_path), env={"VOICECLI_MODELS_DIR": "x",
                                                                 "VOICECLI_CUDA_COMPAT": "auto",
                                                                 "VOICECLI_ENDPOINT__LOCAL__PORT": "9"})
    assert result.returncode in (0, 1), result.stderr
    assert f"] voicecli: {__version__}" in result.stdout


def test_config_init_writes_a_commented_file_that_loads_to_the_defaults(tmp_path: Path) -> None:
    from voicecli.config import Config

    path = tmp_path / "sub" / "config.toml"
    assert run_cli("config", "init", "--config", str(path)).returncode == 0
    text = path.read_text(encoding="utf-8")
    assert "# voice = \"af_heart\"" in text
    defaults = {s.key: s.value for s in Config.load(env={}, config_path=None)}
    loaded = Config.load(config_path=path, env={})
    assert {s.key: s.value for s in loaded} == defaults
    # every commented setting is valid as written: uncommented, the file still loads to the defaults
    uncommented = tmp_path / "all.toml"
    uncommented.write_text(re.sub(r"^# (?=[a-z0-9_]+ = )", "", text, flags=re.MULTILINE), encoding="utf-8")
    uncommented_config = Config.load(config_path=uncommented, env={})
    assert {s.key: s.value for s in uncommented_config} == defaults
    assert uncommented_config.setting("tts.voice").source == f"file {uncommented}"


def test_config_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[tts\n", encoding="utf-8")  # broken: init must still be able to replace it
    refused = run_cli("config", "init", "--config", str(path))
    assert refused.returncode == 2 and "already exists" in refused.stderr and "--force" in refused.stderr
    assert path.read_text(encoding="utf-8") == "[tts\n"
    assert run_cli("config", "init", "--config", str(path), "--force").returncode == 0
    assert run_cli("config", "show", "--config", str(path)).returncode == 0


def test_device_flags_set_the_audio_settings() -> None:
    result = run_cli("config", "show", "--input-device", "USB Mic", "--output-device", "3")
    lines = {line.split("=")[0].strip(): line for line in result.stdout.splitlines()}
    assert "'USB Mic'" in lines["audio.input_device"] and "# flag" in lines["audio.input_device"]
    assert "'3'" in lines["audio.output_device"] and "# flag" in lines["audio.output_device"]


def test_log_flags_send_the_clients_log_to_a_file(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "v.log"
    result = run_cli("--log-level", "debug", "--log-file", str(log), "config", "show",
                     env={"VOICECLI_PYTHON": "python3"})
    assert result.returncode == 0, result.stderr
    assert "VOICECLI_PYTHON is not a setting" in log.read_text(encoding="utf-8")
    assert "VOICECLI_PYTHON" not in result.stderr
    quiet = run_cli("config", "show", env={"VOICECLI_PYTHON": "python3"})  # default level: warning, on stderr
    assert quiet.returncode == 0 and quiet.stderr == ""
    unwritable = run_cli("--log-file", str(tmp_path), "config", "show")  # a directory
    assert unwritable.returncode == 2 and "cannot write the log file" in unwritable.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_command_prints_a_script(shell: str) -> None:
    result = run_cli("completion", shell)
    assert result.returncode == 0 and "voicecli" in result.stdout and "serve" in result.stdout


def test_models_install_all_and_only_contradict() -> None:
    result = run_cli("models", "install", "--all", "--only", "kokoro")
    assert result.returncode == 2 and "--all and --only" in result.stderr
