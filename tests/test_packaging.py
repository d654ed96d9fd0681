"""The distribution carries every package and the defaults file (a non-editable install must not lose modules)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_package_directory_is_listed_in_pyproject() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    roots = {"voicecli": REPO / "voicecli", "voicecli_endpoint": REPO / "container" / "voicecli_endpoint"}
    found = set()
    for name, root in roots.items():
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root).parts
            found.add(".".join((name, *relative)))
    assert found == listed


def test_defaults_file_is_the_config_directory_one() -> None:
    link = REPO / "voicecli" / "default.toml"
    assert link.is_symlink() and link.resolve() == (REPO / "config" / "default.toml").resolve()
