"""Engine selection by name."""

from __future__ import annotations

import importlib.util

import pytest
from voicecli_endpoint.engines.select import ENGINE_NAMES, resolve_engine_name


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
