"""The user file `voicecli config init` writes: every setting, documented, commented out.

Why commented out: a file that repeated the defaults would pin them, so a default improved in a later release
would never reach this user. Uncommenting a line sets that one value; the file as written loads to exactly the
defaults. The text is the shipped defaults file (config/default.toml, the schema), so nothing is documented twice.
"""

from __future__ import annotations

import re
from pathlib import Path

from voicecli.config import default_config_text

HEADER = """\
# voicecli user configuration, written by `voicecli config init`.
#
# Every setting is listed with its default, commented out: uncomment a line and change its value to override it.
# `voicecli config show` prints each effective value and where it came from.
"""

_SETTING = re.compile(r"^(?P<key>[A-Za-z0-9_]+)\s*=")


def template() -> str:
    """The defaults file with its own header replaced and every `key = value` line commented out."""
    lines = default_config_text().splitlines()
    first_section = next(i for i, line in enumerate(lines) if line.startswith("["))
    body = ["# " + line if _SETTING.match(line) else line for line in lines[first_section:]]
    return HEADER + "\n" + "\n".join(body) + "\n"


def write(path: Path, *, force: bool = False) -> None:
    """Write the template to `path`; FileExistsError when it exists and not `force`."""
    if path.exists() and not force:
        raise FileExistsError(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(template(), encoding="utf-8")
