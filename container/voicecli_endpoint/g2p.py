"""Text to misaki phonemes, the symbols Kokoro v1.0 was trained on.

Shared by every engine so they all see exactly the same phonemes. American English, no transformer model
(en_core_web_sm is enough for G2P and loads in seconds). Words misaki's lexicon does not know fall back to
espeak-ng through the libespeak-ng that `espeakng-loader` bundles, so no system package and no network is needed.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

UNKNOWN = "❓"
"""What misaki writes for a word it could not pronounce at all; never sent to the model."""


class Phonemizer:
    """misaki `en.G2P(trf=False, british=False)` with the espeak fallback when it loads.

    Not thread-safe (spaCy and espeak keep state), so calls are serialized with a lock; the server runs them on
    its one inference thread anyway.
    """

    def __init__(self, *, espeak_fallback: bool = True) -> None:
        from misaki import en

        fallback: Any = None
        if espeak_fallback:
            try:
                from misaki import espeak

                fallback = espeak.EspeakFallback(british=False)
            except Exception:  # the fallback is an improvement, not a requirement
                log.warning("espeak-ng fallback unavailable; unknown words will be skipped", exc_info=True)
        self.has_fallback = fallback is not None
        self._g2p = en.G2P(trf=False, british=False, fallback=fallback, unk=UNKNOWN)
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        """Phonemes of `text`, punctuation kept (the chunker splits on it), unpronounceable words dropped."""
        # misaki glues sentences separated by newlines together ("Hi.\nBye." -> "hˈI.bˈI."), which would hide
        # the sentence boundary from the chunker, so all whitespace becomes single spaces first.
        flat = " ".join(text.split())
        with self._lock:
            phonemes, _tokens = self._g2p(flat)
        return " ".join(str(phonemes).replace(UNKNOWN, " ").split())
