"""The speech side's sample rate, named once.

voicecli handles audio at two rates: what the microphone captures for Silero VAD and Whisper (16 kHz, here), and
what Kokoro makes and the wire carries (24 kHz, `voicecli.wire.protocol.SAMPLE_RATE`). Each module names the
one it means, so "SAMPLE_RATE" never means 16 kHz in one place and 24 kHz in another.
"""

from __future__ import annotations

from typing import Final

SPEECH_RATE: Final = 16_000
"""Microphone capture, voice activity detection and transcription: what Silero VAD and Whisper consume."""
