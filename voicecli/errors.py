"""Errors every layer may raise and the CLI reports: their own module, so nothing has to import the CLI for them."""

from __future__ import annotations


class UserError(RuntimeError):
    """An expected failure (bad flag, missing model, unreachable endpoint), reported as one line and exit status 2."""
