"""Test equipment: hypothesis strategies over the WHOLE client request schema of voicecli.wire.protocol.

Every field gets valid values and arbitrary JSON values: huge integers (past Python's 4300-digit conversion
limit, and past float range), floats (NaN, infinities), lone surrogates, control and zero-width characters,
nested arrays and objects. Shared by the validation unit tests (tests/endpoint/test_validation.py) and the
fuzzing of the live endpoint (tests/endpoint/test_fuzz.py), so both exercise the same inputs.

`json` cannot write an integer of more than 4300 digits (nor `1e999`), so such tokens are `Raw` values written
by `to_json` as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from voicecli.wire.protocol import AUDIO_FORMATS, DEFAULTS, HTTP_AUDIO_FORMATS, SAMPLE_RATE


@dataclass(frozen=True)
class Raw:
    """A JSON number token written verbatim."""

    text: str


def to_json(value: Any) -> str:
    """JSON text of `value`, with `Raw` tokens as they are and lone surrogates as \\uXXXX escapes."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{to_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    return json.dumps(value, allow_nan=True)


ODD_CHARACTERS = ["\ud800", "\udfff", "\udc80", "\u200b", "\u200d", "\ufeff", "\u202e", "\u2028", "\x00", "\x1b",
                  "\x7f", "\u0301", "\U0001f600", "\ufffd"]
"""Lone surrogates, zero-width and bidi controls, control characters, a combining mark, an emoji."""

huge_numbers = st.one_of(
    st.integers(300, 6000).map(lambda digits: Raw("9" * digits)),  # past float range; past 4300: unreadable
    st.integers(300, 6000).map(lambda digits: Raw("-" + "1" * digits)),
    st.sampled_from([Raw("1e999"), Raw("-1e999"), Raw("1" + "0" * 400 + ".5"), Raw("2e-999")]),
)
odd_text = st.text(alphabet=st.one_of(st.characters(), st.sampled_from(ODD_CHARACTERS)), max_size=30)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), huge_numbers,
                         st.floats(allow_nan=True, allow_infinity=True), odd_text)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)

SPEAKABLE = ["Hi.", "Okay then.", "It is 5 o'clock."]
UNSPEAKABLE = ["...", "?!", "—", "(((", "\u200bHi\u200b"]
"""Texts that pass validation but may hold little or nothing to speak (the last one has words)."""

TYPES = ["synthesize", "cancel", "close", "SYNTHESIZE", "ping", ""]


def _field(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a valid value, else anything at all."""
    return st.one_of(valid, valid, json_values)


def field_strategies(voices: tuple[str, ...], *, http: bool) -> dict[str, st.SearchStrategy[Any]]:
    """One strategy per field of a synthesis request (WebSocket) or a POST body (`http`)."""
    formats = HTTP_AUDIO_FORMATS if http else AUDIO_FORMATS
    fields: dict[str, st.SearchStrategy[Any]] = {
        "text": _field(st.one_of(st.sampled_from(SPEAKABLE), st.sampled_from(UNSPEAKABLE), odd_text,
                                 st.just("a" * (DEFAULTS.limits.max_text_chars + 1)))),
        "voice": _field(st.sampled_from(voices or (DEFAULTS.voice,))),
        "speed": _field(st.one_of(st.floats(1.5, 2.0), st.sampled_from([2, 2.0]), huge_numbers)),
        "format": _field(st.sampled_from(formats)),
        "request_id": _field(st.one_of(odd_text, st.integers(-(2**63), 2**63),
                                       st.text(min_size=129, max_size=200))),
        "request_timestamp": _field(st.one_of(st.floats(0, 2e9), odd_text)),
        "sample_rate": _field(st.sampled_from([SAMPLE_RATE, float(SAMPLE_RATE)])),
        "type": st.one_of(st.sampled_from(TYPES), json_values, st.text(min_size=200, max_size=400)),
        "extra": json_values,
    }
    if http:
        fields["stream"] = _field(st.booleans())
        del fields["type"], fields["request_id"], fields["sample_rate"]
    return fields


@st.composite
def request_objects(draw: st.DrawFn, voices: tuple[str, ...] = (), *, http: bool = False) -> dict[str, Any]:
    """A JSON object over the request schema: each field present or not, each value valid or arbitrary."""
    obj: dict[str, Any] = {}
    for name, strategy in field_strategies(voices, http=http).items():
        if draw(st.integers(0, 3)) or (name == "text" and draw(st.booleans())):
            obj[name] = draw(strategy)
    if not http and "type" in obj and draw(st.integers(0, 2)) == 0:
        obj["type"] = "synthesize"
    return obj
