"""Decoded audio to the speaker: the sink interface, the speaker sink, the player."""
