"""TTS transports: how a sentence travels to a Kokoro endpoint and comes back as audio, behind one interface.

- `WebSocketTransport`: ONE persistent WebSocket per chat session, pipelined, reconnecting (the design).
- `BatchHttpTransport`: one POST /invocations per request, whole audio (the baseline).
- `voicecli.tts.sagemaker`: the same over SageMaker Runtime (bidirectional stream, response stream, InvokeEndpoint);
  imported on demand since it needs the AWS clients.
- `voicecli.tts.consumer.AudioConsumer`: the one reader of a transport's events (pipeline, `say`, benches).

Use a transport as an async context manager: `async with transport:` connects and always closes it.
"""

from __future__ import annotations

from voicecli.tts.base import (
    AudioChunk,
    AudioDone,
    AudioEvent,
    AudioFailed,
    AudioStart,
    SpeechRequest,
    TransportError,
    TTSTransport,
)
from voicecli.tts.http_batch import BatchHttpTransport
from voicecli.tts.websocket import WebSocketTransport

__all__ = [
    "AudioChunk",
    "AudioDone",
    "AudioEvent",
    "AudioFailed",
    "AudioStart",
    "BatchHttpTransport",
    "SpeechRequest",
    "TTSTransport",
    "TransportError",
    "WebSocketTransport",
]
