"""voicecli.commands.doctor: the checks that need no hardware (the CLI test runs the whole report)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from voicecli.commands import doctor
from voicecli.commands.doctor import check_exposure, render
from voicecli.config import Config


@pytest.mark.parametrize(("env", "ok"), [
    ({}, True),
    ({"VOICECLI_ENDPOINT__LOCAL__HOST": "localhost"}, True),
    ({"VOICECLI_ENDPOINT__LOCAL__HOST": "0.0.0.0", "VOICECLI_ENDPOINT__TOKEN": "a-long-token"}, True),
    ({"VOICECLI_ENDPOINT__LOCAL__HOST": "0.0.0.0"}, False),
    ({"VOICECLI_ENDPOINT__LOCAL__HOST": "192.168.1.20"}, False),
])
def test_a_server_bound_beyond_loopback_without_a_token_is_reported(env: dict[str, str], ok: bool) -> None:
    check = check_exposure(Config.load(env=env, config_path=None))
    assert check.ok is ok
    if not ok:
        report = render([check])
        assert "[FAIL] endpoint exposure" in report and "no token" in report and "endpoint.token" in report


def test_the_chat_profile_without_torch_passes_the_package_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # scripts/setup installs no torch (requirements/chat.lock): that is the supported CPU chat, not a failure
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("torch", "kokoro") else real(name, *a))
    check = doctor.check_packages()
    assert check.ok is True and "torch engine not installed (kokoro, torch" in check.detail
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("torch", "lameenc") else real(name, *a))
    check = doctor.check_packages()
    assert check.ok is False and check.detail == "missing: lameenc" and "[offline]" in check.fix


def test_torch_weights_are_not_a_failure_where_the_torch_engine_is_not_installed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    # The torch engine chosen but not installed: its weights are not a failure either (the onnx default says "not
    # needed by the onnx engine", tested with `models install` per engine).
    config = Config.load(env={}, flags={"models.dir": str(tmp_path), "endpoint.local.engine": "torch"})
    rows = {check.name: check for check in doctor.check_models(config)}
    assert rows["model kokoro-torch"].ok is None and "needs torch" in rows["model kokoro-torch"].detail
    assert rows["model kokoro"].ok is False, "the onnx engine's model missing is still a failure"


@pytest.mark.parametrize(("env", "ok", "says"), [
    ({}, True, "echo cancellation active: WebRTC AEC3 via pywebrtc-audio"),
    ({}, True, "echo it lets through muted"),
    ({"VOICECLI_AUDIO__ECHO_LEAK_GATE": "false"}, True, "not muted (audio.echo_leak_gate = false)"),
    ({}, True, "a voice under the echo holds nothing (audio.echo_double_talk = false)"),
    ({"VOICECLI_AUDIO__ECHO_DOUBLE_TALK": "true"}, True, "a voice under the echo holds the answer"),
    ({"VOICECLI_AUDIO__ECHO": "gate"}, None, "level gate: barge-in needs 6 dB"),
    ({"VOICECLI_AUDIO__ECHO_GATE": "false"}, None, "off: the raw microphone"),
])
def test_the_echo_defence_in_use_is_reported(env: dict[str, str], ok: bool | None, says: str) -> None:
    check = doctor.check_echo(Config.load(env=env))
    assert check.ok is ok and says in check.detail, check


def test_a_missing_canceller_is_a_failure_that_names_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    import voicecli.audio.echo_cancel as echo_cancel

    monkeypatch.setattr(echo_cancel, "BINDING", "pywebrtc_audio_not_installed")
    check = doctor.check_echo(Config.load(env={}))
    assert check.ok is False and "level gate is used" in check.detail and "scripts/setup" in check.fix


def test_the_turn_judge_in_use_is_reported(tmp_path: Path) -> None:
    rules = doctor.check_turn_end(Config.load(env={"VOICECLI_TURN__WORDS": "rules"}))
    assert rules.ok is None and "word rules" in rules.detail
    missing = doctor.check_turn_end(Config.load(env={"VOICECLI_TURN__WORDS": "smollm2",
                                                     "VOICECLI_MODELS__DIR": str(tmp_path)}))
    assert missing.ok is False and "word rules judge instead" in missing.detail
    assert "voicecli models install --only smollm2" in missing.fix
    (tmp_path / "smollm2").mkdir()
    (tmp_path / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    there = doctor.check_turn_end(Config.load(env={"VOICECLI_TURN__WORDS": "smollm2",
                                                   "VOICECLI_MODELS__DIR": str(tmp_path)}))
    assert there.ok is True and "SmolLM2 judges the words" in there.detail
