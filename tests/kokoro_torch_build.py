"""One rebuild of the torch engine's weights per test session, shared by every test module that needs them.

Rebuilding takes 15-45 s and writes 330 MB, so the first caller builds into the session's base temp directory and
later callers (other modules, other fixtures) reuse it. The weights always come from the code under test, never
from an earlier install under the user's models directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from voicecli.models.kokoro_torch import rebuild_from_onnx

ONNX_FILE = "kokoro-v1.0.int8.onnx"
VOICES_FILE = "voices-v1.0.bin"


def rebuilt_models_dir(tmp_path_factory: pytest.TempPathFactory, source_models_dir: Path) -> Path:
    """A models directory whose `kokoro-torch/` was rebuilt in this session and whose `kokoro/` is the source's."""
    root = tmp_path_factory.getbasetemp() / "rebuilt-models"
    target = root / "kokoro-torch"
    if not (target / "kokoro-v1_0.pth").is_file():
        source = source_models_dir / "kokoro"
        rebuild_from_onnx(source / ONNX_FILE, source / VOICES_FILE, target)
    if not (root / "kokoro").exists():
        (root / "kokoro").symlink_to(source_models_dir / "kokoro", target_is_directory=True)
    return root
