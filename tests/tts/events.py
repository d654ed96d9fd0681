"""Reading a transport's events in tests: until given requests finish, and the audio each one received."""

from __future__ import annotations

from collections import defaultdict

from voicecli.tts.base import AudioChunk, AudioDone, AudioEvent, AudioFailed, TTSTransport


async def collect(transport: TTSTransport, ids: set[str], timeout: float = 180) -> list[AudioEvent]:
    """Events until every id in `ids` has finished or failed."""
    events: list[AudioEvent] = []
    open_ids = set(ids)
    while open_ids:
        event = await transport.next_event(timeout)
        events.append(event)
        if isinstance(event, AudioDone | AudioFailed) and event.request_id in open_ids:
            open_ids.discard(event.request_id)
    return events


def audio_by_request(events: list[AudioEvent]) -> dict[str, bytes]:
    """The encoded audio each request received, concatenated in arrival order."""
    audio: dict[str, bytearray] = defaultdict(bytearray)
    for event in events:
        if isinstance(event, AudioChunk):
            audio[event.request_id] += event.data
    return {rid: bytes(data) for rid, data in audio.items()}
