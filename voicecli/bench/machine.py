"""What the numbers were measured on, recorded with every result.

Why: a latency figure without its machine is meaningless (synthesis on a shared 2-core CPU is ~50x slower than on
a GPU), and the load average shows when other work was competing for the cores during a run.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES: tuple[str, ...] = (
    "voicecli", "onnxruntime", "kokoro-onnx", "misaki", "torch", "kokoro", "llama-cpp-python", "websockets",
    "starlette", "uvicorn", "httpx", "numpy", "lameenc", "miniaudio",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(directory: Path) -> str | None:
    """The checked-out commit (read-only `git rev-parse`), plus "+dirty" when the tree has local changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=directory, capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=directory,
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def machine_info(endpoint: dict[str, Any] | None = None) -> dict[str, Any]:
    """CPU, cores, load, OS, Python, package versions, and the endpoint's engine/device/threads (from /stats)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "recorded_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "load_average_1_5_15": load,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "endpoint": endpoint or {},
    }
