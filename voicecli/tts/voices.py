"""Kokoro v1.0 voice names the client offers for cycling in the app.

The endpoint is the authority (it rejects an unknown voice and lists the valid ones); this list only drives the
next/previous-voice keys. English G2P (misaki en) is what the endpoint runs, so the English voices are offered:
a = American, b = British; f/m = female/male.
"""

from __future__ import annotations

ENGLISH_VOICES: tuple[str, ...] = (
    "af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole", "af_nova", "af_river",
    "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric", "am_fenrir", "am_liam", "am_michael", "am_onyx",
    "am_puck", "am_santa", "bf_alice", "bf_emma", "bf_isabella", "bf_lily", "bm_daniel", "bm_fable", "bm_george",
    "bm_lewis",
)


def cycle(current: str, step: int) -> str:
    """The voice `step` places after `current` (wrapping); an unlisted current voice starts from af_heart."""
    index = ENGLISH_VOICES.index(current) if current in ENGLISH_VOICES else ENGLISH_VOICES.index("af_heart")
    return ENGLISH_VOICES[(index + step) % len(ENGLISH_VOICES)]
