"""voicecli: a terminal voice chat that speaks each sentence of the answer as soon as it is written.

The data flow, one module per stage: capture -> endpointing -> transcription (voicecli.listen.listener ties them) ->
llm -> segmentation -> tts (transports) -> audio (MP3 decode) -> playback, with voicecli.converse.timeline running
alongside and voicecli.converse.pipeline driving a turn. The Kokoro endpoint itself is the voicecli_endpoint package
(container/). docs/architecture.md maps every module.
"""

__version__ = "0.1.0"
