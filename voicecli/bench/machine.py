"""What the numbers were measured on, recorded with every result.

Why: a latency figure without its machine is meaningless (synthesis on a shared 2-core CPU is ~50x slower than on
a GPU), and the load average shows when other work was competing for the cores during a run. On a virtual machine
the host can also take CPU time away without the load average showing it (seen here: a synthesis test ran 47-59%
slower while the kernel counted 5.3 s of steal time in 40 s), so the CPU steal time is recorded as well.
"""

from __future__ import annotations

import contextlib
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


def cpu_steal_s(stat: Path = Path("/proc/stat")) -> float | None:
    """CPU time the hypervisor has taken from this machine since boot, in seconds (all CPUs), or None off Linux."""
    try:
        fields = stat.read_text(encoding="ascii").splitlines()[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" and len(fields) > 8 else None
    except (OSError, ValueError, IndexError):
        return None


def finish_machine_info(machine: dict[str, Any]) -> None:
    """Record, at the end of a run, the load average then and the CPU steal time during the run."""
    with contextlib.suppress(OSError):
        machine["load_average_end_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    start, end = machine.get("cpu_steal_s_at_start"), cpu_steal_s()
    if isinstance(start, float) and end is not None:
        machine["cpu_steal_s_during"] = round(end - start, 2)


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
        "cpu_steal_s_at_start": cpu_steal_s(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "endpoint": endpoint or {},
    }
