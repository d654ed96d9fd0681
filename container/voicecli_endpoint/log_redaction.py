"""Keep secrets out of the endpoint's logs, whatever library writes the line.

Why a filter and not just care: our code never logs the token, but at debug level the WebSocket library logs
every handshake header, ``Authorization: Bearer ...`` included, and a stack trace may quote anything. So each
log handler gets a filter that blanks bearer credentials and the literal values of the secrets we know of (the
endpoint token, AWS credentials from the environment) before a record is written.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s,;'\"]+")
SECRET_ENV_NAMES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "VOICECLI_ENDPOINT__TOKEN")
MIN_SECRET_CHARS = 6
"""Shorter values are not blanked: replacing every "abc" in the log would hide more than it protects."""


def known_secrets(token: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """The token plus the credential values present in the environment."""
    env = os.environ if environ is None else environ
    values = [token, *(env.get(name, "") for name in SECRET_ENV_NAMES)]
    return sorted({v for v in values if len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    text = _BEARER.sub(rf"\g<1>{REDACTED}", text)
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites the message and its string arguments in place (the argument tuple keeps its shape, since some
    formatters, uvicorn's access log among them, unpack it)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = list(secrets)

    def _clean(self, value: Any) -> Any:
        return redact(value, self.secrets) if isinstance(value, str) else value

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._clean(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self._clean(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: self._clean(arg) for key, arg in record.args.items()}
        if record.exc_info and record.exc_text is None:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        return True


def install(secrets: Iterable[str]) -> RedactSecrets:
    """Attach one filter to every handler configured so far (the root's and each named logger's)."""
    flt = RedactSecrets(secrets)
    loggers: list[logging.Logger] = [logging.getLogger()]
    loggers += [lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    for logger in loggers:
        for handler in logger.handlers:
            if flt not in handler.filters:
                handler.addFilter(flt)
    return flt
