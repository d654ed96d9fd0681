"""Every module imports on its own, first, in a clean interpreter: what an import cycle or a missing import breaks.

A cycle can hide while the test suite imports modules in a lucky order; importing each module first, with none of
voicecli's modules loaded, exposes it. One child interpreter walks every module and clears voicecli's (and the
endpoint's) modules from sys.modules before each import, so every import starts clean (third-party packages stay
loaded: they cannot take part in our cycles, and reloading torch 90 times would take minutes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"voicecli": ROOT / "voicecli", "voicecli_endpoint": ROOT / "container" / "voicecli_endpoint"}

_CHILD = """
import importlib, json, sys, traceback
failures = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m.split(".")[0] in ("voicecli", "voicecli_endpoint")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException:
        failures[name] = traceback.format_exc(limit=-3)
print(json.dumps(failures))
"""


def _modules() -> list[str]:
    names = []
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__main__":
                continue  # runs the server when imported
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join((package, *parts)))
    return names


def test_the_module_list_is_complete() -> None:
    names = _modules()
    assert {"voicecli.converse.pipeline", "voicecli_endpoint.app", "voicecli.tui.chat_app"} <= set(names)
    assert len(names) > 80


def test_every_module_imports_first_in_a_clean_interpreter() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "container")])}
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(_modules())], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failures, "\n\n".join(f"{name}:\n{trace}" for name, trace in failures.items())
