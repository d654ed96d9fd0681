"""Smoke test of the real app in a real terminal: tmux runs `voicecli chat`, types a message, reads the screen."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import REPO, RunningServer

pytestmark = pytest.mark.slow


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30, check=False).stdout


def wait_screen(session: str, needles: list[str], timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if all(needle in screen for needle in needles):
            return screen
        time.sleep(0.25)
    raise AssertionError(f"{needles} not on screen:\n{screen}")


def test_app_in_tmux_answers_a_typed_message(server: RunningServer, models_dir: Path, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed for this test: apt-get install tmux")
    session = f"voicecli-{uuid.uuid4().hex[:8]}"
    python = REPO / ".venv" / "bin" / "python"
    env = {"VOICECLI_MODELS__DIR": str(models_dir), "XDG_STATE_HOME": str(tmp_path), "TERM": "xterm-256color"}
    command = " ".join([*(f"{k}={v}" for k, v in env.items()), str(python if python.exists() else sys.executable),
                        "-m", "voicecli", "--endpoint", server.http_url, "chat", "--mute"])
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "30", command],
                   check=True, timeout=30, cwd=REPO, env={**os.environ, "TMUX": ""})
    try:
        wait_screen(session, ["ready", "idle"])
        tmux("send-keys", "-t", session, "Name one planet.", "Enter")
        screen = wait_screen(session, ["first audio decoded", "bidi n=1"])  # --mute: nothing plays
        assert "you Name one planet." in screen
        assert "assistant" in screen and "LLM 1st token" in screen
        tmux("send-keys", "-t", session, "C-q")
        deadline = time.monotonic() + 30
        while session in tmux("list-sessions") and time.monotonic() < deadline:
            time.sleep(0.25)
        assert session not in tmux("list-sessions")
    finally:
        tmux("kill-session", "-t", session)
