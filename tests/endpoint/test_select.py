"""Engine selection by name."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from voicecli_endpoint.engines.select import ENGINE_NAMES, load_engine, resolve_engine_name


def test_explicit_names() -> None:
    assert resolve_engine_name("onnx") == "onnx"
    assert resolve_engine_name("torch") == "torch"
    assert ENGINE_NAMES == ("auto", "onnx", "torch")


def test_unknown_name() -> None:
    with pytest.raises(ValueError, match="auto, onnx, torch"):
        resolve_engine_name("tensorflow")


def test_auto_follows_cuda() -> None:
    expected = "onnx"
    if importlib.util.find_spec("torch") is not None:
        import torch

        expected = "torch" if torch.cuda.is_available() else "onnx"
    assert resolve_engine_name("auto") == expected


def test_torch_engine_without_torch_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # what the chat's own install (no torch) sees; simulated here, where the test profile has torch
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match=r"needs torch \(not installed\): pip install -e '\.\[torch\]'"):
        load_engine("torch", tmp_path)
