"""Microphone to transcript: capture, end of turn, does it sound finished, transcription, the listener."""
