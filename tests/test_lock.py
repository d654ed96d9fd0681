"""The hashed locks in requirements/ agree with pyproject.toml, and torch stays at a release without PYSEC-2026-2286.

scripts/lock makes the locks with uv (it needs the network); these tests only parse files. Which extras each lock
covers is read out of scripts/lock itself, so the two cannot drift apart silently.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK_SCRIPT = ROOT / "scripts" / "lock"
REQUIREMENTS = ROOT / "requirements"
PYPROJECT = ROOT / "pyproject.toml"
SAFE_TORCH = Version("2.10")
"""torch before 2.10 carries PYSEC-2026-2286."""
CUDA_STACK = re.compile(r"^(torch|triton|nvidia-.+|cuda-.+)$")
"""What PyPI's torch pulls in; the image takes these from a CUDA index instead (see container/Dockerfile)."""


@dataclass(frozen=True)
class Pin:
    version: Version
    hashes: tuple[str, ...]


def parse_lock(text: str) -> dict[str, Pin]:
    """name -> pinned version and sha256 hashes, from a `uv pip compile --generate-hashes` file."""
    pins: dict[str, Pin] = {}
    for block in re.split(r"\n(?=[^\s#])", text):
        lines = [line.strip().rstrip("\\").strip() for line in block.splitlines() if not line.lstrip().startswith("#")]
        lines = [line for line in lines if line]
        if not lines:
            continue
        requirement = Requirement(lines[0])
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", f"not an exact pin: {lines[0]}"
        name = canonicalize_name(requirement.name)
        assert name not in pins, f"{name} is pinned twice"
        hashes = tuple(line.removeprefix("--hash=sha256:") for line in lines[1:])
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), f"{name}: unhashed or bad hash"
        pins[name] = Pin(Version(specifiers[0].version), hashes)
    return pins


def load_endpoint_requirements() -> ModuleType:
    """container/endpoint_requirements.py, the one reader of pyproject's extras (it is a script, not a package)."""
    path = ROOT / "container" / "endpoint_requirements.py"
    spec = importlib.util.spec_from_file_location("endpoint_requirements", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lock_profiles() -> dict[str, list[str]]:
    """Lock name -> the requirement lines of pyproject.toml it must satisfy, as scripts/lock compiles them."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    reader = load_endpoint_requirements()
    script = LOCK_SCRIPT.read_text(encoding="utf-8").replace("\\\n", " ")
    profiles: dict[str, list[str]] = {}
    for name, source, options in re.findall(r"^compile requirements/(\w+)\.lock (\S+)(.*)$", script, re.M):
        argv = shlex.split(options)
        if source == "pyproject.toml":
            extras = list(project["optional-dependencies"]) if "--all-extras" in argv else [
                argv[i + 1] for i, a in enumerate(argv) if a == "--extra"]
            lines = list(project["dependencies"])
            for extra in extras:
                lines.extend(reader.extra_requirements(project, extra))
        else:  # the endpoint image's list, made by endpoint_requirements.py with the arguments scripts/lock passes
            match = re.search(r"container/endpoint_requirements\.py pyproject\.toml (.*?)>", script)
            assert match, "scripts/lock compiles a generated list without calling endpoint_requirements.py"
            args = shlex.split(match.group(1))
            lines = reader.requirements(PYPROJECT, [args[i + 1] for i, a in enumerate(args) if a == "--extra"],
                                        [args[i + 1] for i, a in enumerate(args) if a == "--base"])
        profiles[name] = list(dict.fromkeys(lines))
    return profiles


PROFILES = lock_profiles()
LOCKS = {name: parse_lock((REQUIREMENTS / f"{name}.lock").read_text(encoding="utf-8")) for name in PROFILES}


def dropped() -> set[str]:
    """Distributions requirements/overrides.txt removes from every lock (a marker that is never true)."""
    names = set()
    for line in (REQUIREMENTS / "overrides.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            assert requirement.marker is not None and not requirement.marker.evaluate(), line
            names.add(canonicalize_name(requirement.name))
    return names


def test_scripts_lock_makes_the_three_locks() -> None:
    assert set(PROFILES) == {"chat", "ci", "endpoint"}
    assert all(LOCKS.values())


@pytest.mark.parametrize("lock", sorted(PROFILES))
def test_every_pyproject_requirement_is_locked_at_a_version_it_allows(lock: str) -> None:
    pins = LOCKS[lock]
    problems = []
    for line in PROFILES[lock]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if lock == "endpoint" and CUDA_STACK.match(name):
            assert name not in pins, f"{name} belongs to the CUDA index's torch, not to the image's lock"
            continue
        if name not in pins:
            problems.append(f"{line}: not in {lock}.lock")
        elif not requirement.specifier.contains(pins[name].version, prereleases=True):
            problems.append(f"{line}: {lock}.lock has {pins[name].version}")
    assert not problems, "run scripts/lock: " + "; ".join(problems)


def test_overridden_distributions_are_in_no_lock_and_one_phonemizer_is() -> None:
    assert dropped() == {"phonemizer-fork", "spacy-curated-transformers"}
    for name, pins in LOCKS.items():
        assert not dropped() & pins.keys(), name
        assert "phonemizer" in pins, name


def test_a_package_has_one_version_in_every_lock() -> None:
    # scripts/test installs ci.lock over what scripts/setup installed from chat.lock: no version may flip back and
    # forth, and the image must run what CI tested
    ci = LOCKS["ci"]
    for name in ("chat", "endpoint"):
        differ = {p: (pin.version, ci[p].version) for p, pin in LOCKS[name].items() if ci[p].version != pin.version}
        assert not differ, f"{name}.lock vs ci.lock: {differ}"
        assert LOCKS[name].keys() <= ci.keys()


def test_the_chat_installs_no_torch_cuda_or_cdk() -> None:
    heavy = {n for n in LOCKS["chat"] if CUDA_STACK.match(n) or n in {"kokoro", "transformers", "aws-cdk-lib", "jsii"}}
    assert not heavy


def test_minimum_safe_torch() -> None:
    text = PYPROJECT.read_text(encoding="utf-8")
    (line,) = [line for line in text.splitlines() if line.strip().startswith('"torch')]
    assert "PYSEC-2026-2286" in line, "the reason for the lower bound belongs next to it"
    project = tomllib.loads(text)["project"]
    (spec,) = [Requirement(r).specifier for r in project["optional-dependencies"]["torch"] if r.startswith("torch")]
    assert not list(spec.filter(["1.13.1", "2.0.0", "2.9.1", "2.9.99", "2.10.0rc1"], prereleases=True))
    assert spec.contains("2.10.0") and spec.contains("2.14.1") and not spec.contains("2.15.0")
    for name, pins in LOCKS.items():
        if "torch" in pins:
            assert pins["torch"].version >= SAFE_TORCH, f"{name}.lock pins torch {pins['torch'].version}"


def test_the_image_installs_the_torch_ci_tested() -> None:
    dockerfile = (ROOT / "container" / "Dockerfile").read_text(encoding="utf-8")
    match = re.search(r"^ARG TORCH_VERSION=(\S+)$", dockerfile, re.M)
    assert match and Version(match.group(1)) == LOCKS["ci"]["torch"].version


def test_parse_lock_rejects_what_pip_would_not_check() -> None:
    good = "a==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n    # via b\n"
    assert parse_lock(good) == {"a": Pin(Version("1.0"), ("0" * 64,))}
    with pytest.raises(AssertionError, match="not an exact pin"):
        parse_lock("a>=1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    with pytest.raises(AssertionError, match="unhashed"):
        parse_lock("a==1.0\n")
