"""voicecli.commands.completion: the generated scripts are valid for their shell and offer what the parser accepts.

bash runs here, so its script is checked by `bash -n` and then exercised: sourced, its completion function is called
with the words a user typed, and COMPREPLY is compared with the parser. zsh and fish are checked by their own
`-n` when installed, else structurally (every command and option present, blocks balanced).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess

import pytest

from voicecli.cli import build_parser
from voicecli.commands.completion import nodes, script


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


def _bash_complete(text: str, *words: str) -> list[str]:
    """COMPREPLY after typing `words` (the last one is the word being completed)."""
    quoted = " ".join("'" + w + "'" for w in words)
    program = f"{text}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _voicecli_complete; " \
              'printf "%s\\n" "${COMPREPLY[@]}"'
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True, timeout=30)
    return [line for line in result.stdout.splitlines() if line]


def test_the_tree_is_read_from_the_parser(parser: argparse.ArgumentParser) -> None:
    tree = {node.key: node for node in nodes(parser)}
    assert {name for name, _ in tree["voicecli"].commands} >= {"chat", "models", "config", "doctor", "serve",
                                                                "completion", "say", "bench"}
    assert "voicecli models install" in tree and "voicecli config init" in tree and "voicecli bench tts" in tree
    serve_flags = {flag for option in tree["voicecli serve"].options for flag in option.flags}
    assert {"--token", "--log-level", "--log-file", "--max-sessions", "--models-dir"} <= serve_flags


def test_bash_script_is_valid_and_completes_from_the_parser(parser: argparse.ArgumentParser) -> None:
    text = script("bash", parser)
    subprocess.run(["bash", "-n"], input=text, text=True, check=True, timeout=30)
    top = {name for name, _ in next(nodes(parser)).commands}
    assert set(_bash_complete(text, "voicecli", "")) == top
    assert _bash_complete(text, "voicecli", "models", "") == ["install", "list"]
    assert "kokoro" in _bash_complete(text, "voicecli", "models", "install", "--only", "")
    assert _bash_complete(text, "voicecli", "--llm", "bedrock", "chat", "--mode", "") == ["bidi", "batch"]
    assert _bash_complete(text, "voicecli", "serve", "--engine", "o") == ["onnx"]
    assert _bash_complete(text, "voicecli", "serve", "--tok") == ["--token"]
    assert _bash_complete(text, "voicecli", "completion", "") == ["bash", "zsh", "fish"]
    assert _bash_complete(text, "voicecli", "chat", "--voice", "") == []  # a free value: nothing to offer


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_are_valid(shell: str, parser: argparse.ArgumentParser) -> None:
    text = script(shell, parser)
    executable = shutil.which(shell)
    if executable is not None:
        subprocess.run([executable, "-n"], input=text, text=True, check=True, timeout=30)
    for node in nodes(parser):
        for name, _ in node.commands:
            assert f"'{node.key}|{name}'" in text
    if shell == "zsh":
        assert text.startswith("#compdef voicecli\n")
        code = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
        tokens = re.split(r"[\s;]+", code)
        assert tokens.count("case") == tokens.count("esac") and tokens.count("if") == tokens.count("fi")
        assert tokens.count("for") == tokens.count("done") and text.count("{") == text.count("}")
    else:
        blocks = sum(line.split()[0] in ("function", "for", "if", "switch") for line in text.splitlines()
                     if line.strip() and not line.startswith("complete"))
        ends = sum(line.strip() == "end" for line in text.splitlines())
        assert blocks == ends
        assert "complete -c voicecli -n 'test (__voicecli_path) = \"voicecli serve\"' -l token -x" in text
        assert "-l engine -x -a 'auto onnx torch'" in text
