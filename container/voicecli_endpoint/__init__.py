"""The Kokoro-82M TTS endpoint: the server SageMaker runs in the container and `voicecli serve` runs locally.

Routes (app.py): GET /ping, POST /invocations, WebSocket /invocations-bidirectional-stream; the wire protocol is
voicecli.wire.protocol. Text becomes misaki phonemes (g2p.py), is cut into pieces (chunking.py), synthesized by an
engine (engines/), scheduled fairly across sessions (scheduler.py) and encoded as frame-aligned MP3 or PCM16
(audio_encoding.py).
"""
