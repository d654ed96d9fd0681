"""The image's requirement list: read from pyproject.toml, free of client dependencies, and enough for what the
endpoint server and `voicecli models install` import inside the image.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "container" / "endpoint_requirements.py"
PYPROJECT = ROOT / "pyproject.toml"


def run(*args: str, pyproject: Path = PYPROJECT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(pyproject), *args], capture_output=True, text=True,
                          timeout=30)


def lock_arguments() -> list[str]:
    """The exact --extra/--base arguments scripts/lock passes when it makes requirements/endpoint.lock, the lock the
    Dockerfile installs, so this test checks what the image installs."""
    text = (ROOT / "scripts" / "lock").read_text(encoding="utf-8").replace("\\\n", " ")
    match = re.search(r"container/endpoint_requirements\.py pyproject\.toml (.*?)>", text)
    assert match, "scripts/lock no longer calls endpoint_requirements.py"
    return shlex.split(match.group(1))


def image_requirements() -> list[Requirement]:
    result = run(*lock_arguments())
    assert result.returncode == 0, result.stderr
    return [Requirement(line) for line in result.stdout.splitlines()]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_endpoint_and_torch_extras_without_client_dependencies() -> None:
    names = {canonical(r.name): r for r in image_requirements()}
    assert {"starlette", "uvicorn", "kokoro-onnx", "misaki", "lameenc", "torch", "kokoro"} <= names.keys()
    # misaki's [en] extra would bring phonemizer-fork next to kokoro-onnx's phonemizer: its deps are listed instead
    assert not names["misaki"].extras and "phonemizer" in names and "phonemizer-fork" not in names
    assert not names["torch"].specifier.contains("2.9.1") and names["torch"].specifier.contains("2.10.0")
    client_only = {"textual", "sounddevice", "faster-whisper", "miniaudio", "websockets", "boto3", "llama-cpp-python"}
    assert not client_only & names.keys()


def test_self_referencing_extras_expand_and_duplicates_collapse(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "Demo_Pkg"\ndependencies = ["rich>=13", "numpy<3"]\n'
        '[project.optional-dependencies]\na = ["x==1"]\nb = ["y>2", "x==2"]\n'
        'all = ["demo-pkg[a,b]", "z"]\n', encoding="utf-8")
    result = run("--extra", "all", "--base", "numpy", pyproject=pyproject)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["x==1", "y>2", "z", "numpy<3"]


def test_unknown_names_are_errors_not_guesses() -> None:
    missing_extra = run("--extra", "nope")
    assert missing_extra.returncode == 2 and "nope" in missing_extra.stderr
    missing_base = run("--base", "textual-but-misspelt")
    assert missing_base.returncode == 2 and "textual-but-misspelt" in missing_base.stderr


# --- does the image have everything the code it runs imports? ------------------------------------------------

def installed_closure(requirements: list[Requirement]) -> set[str]:
    """Canonical names of every distribution the requirements pull in, following extras, as installed here."""
    seen: set[tuple[str, frozenset[str]]] = set()
    stack = list(requirements)
    while stack:
        requirement = stack.pop()
        key = (canonical(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dependencies = metadata.distribution(requirement.name).requires or []
        except metadata.PackageNotFoundError:
            continue
        for line in dependencies:
            dependency = Requirement(line)
            extras = requirement.extras or {""}
            if dependency.marker is None or any(dependency.marker.evaluate({"extra": e}) for e in extras):
                stack.append(dependency)
    return {name for name, _ in seen}


def imports(path: Path, top_level_only: bool) -> Iterator[str]:
    """Absolute module names a file imports; relative imports resolve inside the same package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def module_file(module: str) -> Path | None:
    """Source file of a first-party module (voicecli or voicecli_endpoint), None for anything else."""
    parts = module.split(".")
    if parts[0] == "voicecli":
        base = ROOT / "voicecli"
    elif parts[0] == "voicecli_endpoint":
        base = ROOT / "container" / "voicecli_endpoint"
    else:
        return None
    for candidate in (base.joinpath(*parts[1:]).with_suffix(".py"), base.joinpath(*parts[1:], "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def third_party_imports(roots: list[Path], all_imports_in: Path) -> dict[str, str]:
    """Top-level third-party module -> the first-party file importing it, following first-party imports.
    Every import counts inside `all_imports_in` (code that runs in the server); elsewhere only module-level ones
    (a CLI's other subcommands import their own dependencies lazily)."""
    found: dict[str, str] = {}
    queue, visited = list(roots), set()
    while queue:
        path = queue.pop()
        if path in visited:
            continue
        visited.add(path)
        for module in imports(path, top_level_only=not path.is_relative_to(all_imports_in)):
            target = module_file(module)
            if target is not None:
                queue.append(target)
                package_init = target.parent / "__init__.py"
                if package_init.is_file():
                    queue.append(package_init)
            elif module.split(".")[0] not in ("voicecli", "voicecli_endpoint"):
                found.setdefault(module.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_image_covers_every_import_of_the_server_and_the_models_installer() -> None:
    endpoint = ROOT / "container" / "voicecli_endpoint"
    roots = [*sorted(endpoint.rglob("*.py")), ROOT / "voicecli" / "models" / "install.py"]
    cli = ROOT / "voicecli" / "cli.py"
    if cli.exists():
        roots.append(cli)
    distributions = metadata.packages_distributions()
    allowed = installed_closure(image_requirements())
    missing = []
    for module, importer in sorted(third_party_imports(roots, all_imports_in=endpoint).items()):
        if module in sys.stdlib_module_names or module == "__future__":
            continue
        providers = {canonical(d) for d in distributions.get(module, [])}
        if not providers:
            pytest.fail(f"{importer} imports {module!r}, which no installed distribution provides")
        if not providers & allowed:
            missing.append(f"{module} (from {sorted(providers)}, imported by {importer})")
    assert not missing, "the image would lack: " + "; ".join(missing)
