"""Print the requirement lines the endpoint image installs, read from pyproject.toml.

Why: the container needs the `endpoint` and `torch` extras plus the few base dependencies that `voicecli models
install` imports at build time, but none of the client's (textual, sounddevice, faster-whisper, ...). Reading them
out of pyproject.toml keeps one source of truth for every version range: `scripts/lock` compiles this list into the
hashed requirements/endpoint.lock, which the Dockerfile installs before the project itself (`pip install --no-deps`).

Usage: python endpoint_requirements.py PYPROJECT [--extra NAME]... [--base NAME]...
  --extra NAME   include every requirement of the optional-dependency group NAME (self-references such as
                 "voicecli[torch]" are expanded)
  --base NAME    include the base dependency whose distribution name is NAME (with its version range)
Runs on the bare interpreter (stdlib only); tests/test_lock.py also imports it to expand pyproject's extras.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def canonical(name: str) -> str:
    """PEP 503 normalisation, so "Kokoro_ONNX" and "kokoro-onnx" compare equal."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"cannot read a distribution name from {requirement!r}")
    return canonical(match.group(1))


def extra_requirements(project: Mapping[str, object], extra: str, seen: set[str] | None = None) -> list[str]:
    """Requirements of one extra, with "<this project>[a,b]" expanded into the requirements of a and b."""
    seen = set() if seen is None else seen
    if extra in seen:
        return []
    seen.add(extra)
    extras = project.get("optional-dependencies", {})
    if not isinstance(extras, Mapping) or extra not in extras:
        raise KeyError(f"pyproject.toml has no optional-dependencies group {extra!r}")
    own = canonical(str(project["name"]))
    lines: list[str] = []
    for requirement in extras[extra]:
        match = _NAME.match(requirement)
        if match is not None and canonical(match.group(1)) == own:
            for nested in (match.group(2) or "").split(","):
                if nested.strip():
                    lines.extend(extra_requirements(project, nested.strip(), seen))
        else:
            lines.append(requirement)
    return lines


def base_requirements(project: Mapping[str, object], names: Sequence[str]) -> list[str]:
    """The base dependencies named in `names`; a name that is not a base dependency is an error, not a guess."""
    dependencies = project.get("dependencies", [])
    if not isinstance(dependencies, list):
        raise TypeError("project.dependencies must be a list")
    by_name = {requirement_name(str(r)): str(r) for r in dependencies}
    missing = [n for n in names if canonical(n) not in by_name]
    if missing:
        raise KeyError(f"not base dependencies in pyproject.toml: {', '.join(missing)}")
    return [by_name[canonical(n)] for n in names]


def requirements(pyproject: Path, extras: Sequence[str], bases: Sequence[str]) -> list[str]:
    """The union of the chosen extras and base dependencies, first occurrence kept, in a stable order."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lines: list[str] = []
    for extra in extras:
        lines.extend(extra_requirements(project, extra))
    lines.extend(base_requirements(project, bases))
    unique: dict[str, str] = {}
    for line in lines:
        unique.setdefault(requirement_name(line), line)
    return list(unique.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("pyproject", type=Path)
    parser.add_argument("--extra", action="append", default=[], metavar="NAME")
    parser.add_argument("--base", action="append", default=[], metavar="NAME")
    args = parser.parse_args(argv)
    try:
        lines = requirements(args.pyproject, args.extra, args.base)
    except (KeyError, ValueError, TypeError) as exc:
        print(f"endpoint_requirements: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
