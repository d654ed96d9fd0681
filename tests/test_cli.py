"""The command line as a user meets it: help everywhere, one-line errors with exit status 2, provenance shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from voicecli.cli import build_parser


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicecli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, check=False)


@pytest.mark.parametrize("command", [[], ["chat"], ["models"], ["models", "install"], ["models", "list"],
                                     ["config"], ["config", "show"], ["doctor"], ["serve"]])
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
