"""Choosing and loading an engine by name, importing only what that engine needs.

torch is heavy (seconds to import, a GB of memory), so it is imported only when the torch engine is asked for
or when "auto" has to find out whether a CUDA GPU is present.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Literal

from voicecli.wire.server_options import ENGINE_NAMES, EngineName
from voicecli_endpoint.engines.base import Engine

__all__ = ["ENGINE_NAMES", "EngineName", "cuda_available", "load_engine", "resolve_engine_name"]

log = logging.getLogger(__name__)


def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA device."""
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def resolve_engine_name(name: str) -> Literal["onnx", "torch"]:
    """"auto" -> "torch" on a CUDA GPU, else "onnx"; the others unchanged."""
    if name == "auto":
        return "torch" if cuda_available() else "onnx"
    if name == "onnx":
        return "onnx"
    if name == "torch":
        return "torch"
    raise ValueError(f"unknown engine {name!r}; valid engines: {', '.join(ENGINE_NAMES)}")


def load_engine(name: str, models_dir: Path, threads: int = 1, solo_threads: int = 0) -> Engine:
    """Load the named engine ("auto", "onnx" or "torch") from `models_dir`. `solo_threads`: see sizing.py (onnx)."""
    resolved = resolve_engine_name(name)
    log.info("loading %s engine (requested %r) from %s with %d thread(s)", resolved, name, models_dir, threads)
    if resolved == "torch":
        missing = [module for module in ("torch", "kokoro") if importlib.util.find_spec(module) is None]
        if missing:  # the chat's install (scripts/setup, requirements/chat.lock) leaves the torch engine out
            raise ModuleNotFoundError(f"the torch engine needs {' and '.join(missing)} (not installed): "
                                      "pip install -e '.[torch]' (scripts/test installs it), or use --engine onnx")
        from voicecli_endpoint.engines.torch_engine import TorchEngine

        return TorchEngine(models_dir, threads)
    from voicecli_endpoint.engines.onnx_engine import OnnxEngine

    return OnnxEngine(models_dir, threads, solo_threads=solo_threads)
