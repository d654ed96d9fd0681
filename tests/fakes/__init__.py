"""Fakes for the fast tier: the project's own interfaces, implemented instantly and deterministically.

The slow tier tests the pipeline, turn taking and the endpoint against real models and a real endpoint process;
these let the fast tier test the same logic in milliseconds, on real code wherever the code under test is:

- `llm.ScriptedLLM` (and `PausableLLM`): `voicecli.llm.base.LLM` answering from queued `Reply` scripts: deltas,
  delays, a hold the test releases, a failure mid-stream; every call recorded.
- `tts.ToneTransport`: `voicecli.tts.base.TTSTransport` answering each request, in order, with real MP3 frames
  (or PCM16) of a tone, so the decoders and sinks run for real; a gate, chunk delays, refusals, cancels recorded.
- `engine.ToneEngine`: `voicecli_endpoint.engines.base.Engine` returning a tone per phoneme count (whole, or in
  parts like the onnx engine), with a gate to hold syntheses mid-flight.
- `phonemizer.FakePhonemizer`: `voicecli_endpoint.g2p.Phonemizer`'s call without misaki, spaCy or espeak-ng.
- `endpoint.InProcessEndpoint`: the real endpoint app (`create_app`) under uvicorn on a thread of the test process,
  loading ToneEngine and FakePhonemizer: what `tests/conftest.py`'s `fake_endpoint` fixture serves.
- `tones`: the tone audio they share (samples, PCM16, lameenc MP3 frames made once per duration).
"""
