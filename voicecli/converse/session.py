"""Assembling a chat session from configuration: the LLM, the TTS transports, and the pipeline between them.

Kept apart from the UIs (TUI, line mode, one-shot) so they all start, warm up and shut down the same way, and so a
failure at start-up (endpoint down, model missing, credentials absent) is reported identically everywhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from voicecli.config import Config
from voicecli.converse.pipeline import PipelineEvent, PipelineSettings, VoicePipeline
from voicecli.llm import LLM, LLMError, context_turns, create_llm
from voicecli.llm.history import Conversation
from voicecli.llm.local import LOCAL_MODELS
from voicecli.playback.sinks import AudioSink
from voicecli.playback.speaker import open_sink
from voicecli.tts.base import TransportError, TTSTransport
from voicecli.tts.http_batch import BatchHttpTransport
from voicecli.tts.local_endpoint import EndpointStartError, LocalEndpoint, ensure_local_endpoint
from voicecli.tts.websocket import WebSocketTransport
from voicecli.wire.server_options import ServerOptions

Progress = Callable[[str], None]


STARTUP_ERRORS = (TransportError, EndpointStartError, LLMError, OSError)
"""What opening a session may raise for reasons outside the program (endpoint, LLM, devices): each front end shows
these as one message that says what to do, never a traceback."""


def llm_from_config(config: Config) -> LLM:
    """The configured LLM: its typed [llm] sections go to `create_llm` as loaded, plus the models directory."""
    return create_llm(config.llm, models_dir=config.models_dir)


def llm_label(config: Config) -> str:
    backend = config.llm.backend
    if backend == "local":
        local = config.llm.local  # the GGUF's name says which model and quantisation answer
        return f"local {Path(local.model_file or LOCAL_MODELS[local.model]).stem}"
    if backend == "bedrock":
        return f"bedrock {config.llm.bedrock.model_id}"
    return f"openai {config.llm.openai.model}"


def pipeline_settings(config: Config) -> PipelineSettings:
    return PipelineSettings(
        mode=config.tts.mode,
        voice=config.tts.voice,
        speed=config.tts.speed,
        audio_format=config.tts.format,
        system_prompt=config.llm.system_prompt,
        max_tokens=config.llm.max_tokens,
        temperature=config.llm.temperature,
        first_fragment_words=config.segmentation.first_fragment_words,
        first_phrase_words=config.segmentation.first_phrase_words,
        # The embedded LLM and a local endpoint share the cores: lend the LLM's to the first sentence's synthesis.
        pause_llm_for_first_audio=config.endpoint.target == "local",
        min_sentence_chars=config.segmentation.min_sentence_chars,
    )


@dataclass
class Session:
    """Everything a chat holds open; `aclose` releases it in reverse order of opening (one AsyncExitStack)."""

    config: Config
    pipeline: VoicePipeline
    endpoint_label: str
    local: LocalEndpoint | None = None
    transports: dict[str, TTSTransport] = field(default_factory=dict)
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    async def aclose(self) -> None:
        await self.stack.aclose()


@dataclass(frozen=True)
class Transports:
    """The connected transports for both modes, what they reach (for the status line), and the local endpoint
    started for them (None when the endpoint was already there, or remote)."""

    by_mode: dict[str, TTSTransport]
    label: str
    local: LocalEndpoint | None


def sagemaker_transports(config: Config) -> tuple[dict[str, TTSTransport], str]:
    """bidi mode uses the configured transport (bidirectional stream by default); batch mode uses InvokeEndpoint."""
    from voicecli.tts.sagemaker import (
        SageMakerBatchTransport,
        SageMakerBidiTransport,
        SageMakerStreamTransport,
        SageMakerTarget,
    )

    target = SageMakerTarget(
        endpoint_name=config.endpoint.sagemaker.name,
        region=config.endpoint.sagemaker.region or None,
        profile=config.endpoint.sagemaker.profile or None,
        endpoint_url=config.endpoint.sagemaker.endpoint_url or None,
    )
    kind = config.endpoint.sagemaker.transport
    streaming: TTSTransport
    if kind == "bidi":
        streaming = SageMakerBidiTransport(target, connect_timeout_s=config.endpoint.connect_timeout_s)
    elif kind == "stream":
        streaming = SageMakerStreamTransport(target)
    else:
        streaming = SageMakerBatchTransport(target)
    label = f"sagemaker {target.endpoint_name} ({target.region}, {kind})"
    return {"bidi": streaming, "batch": SageMakerBatchTransport(target)}, label


async def open_transports(config: Config, progress: Progress, stack: contextlib.AsyncExitStack) -> Transports:
    """Connect and warm the transports for both modes; bidi's connection then serves the whole session.

    Everything opened (the local endpoint started, each transport) is pushed on `stack`, which closes it: when the
    caller's block ends, or here already when something fails half-way.
    """
    target = config.endpoint.target
    token = config.endpoint.token
    timeout = config.endpoint.connect_timeout_s
    local: LocalEndpoint | None = None
    async with contextlib.AsyncExitStack() as opening:
        if target == "sagemaker":
            transports, label = sagemaker_transports(config)
        else:
            if target == "local":
                local = await ensure_local_endpoint(ServerOptions.from_config(config), timeout,
                                                    config.endpoint.local.autostart, progress)
                opening.callback(local.stop)
                url = local.url
            else:
                url = target
            transports = {"bidi": WebSocketTransport(url, token, connect_timeout_s=timeout),
                          "batch": BatchHttpTransport(url, token, timeout_s=max(timeout, 60.0))}
            label = f"{'local ' if local else ''}{url}"
        for transport in transports.values():
            progress(f"connecting the {transport.name} transport")
            await opening.enter_async_context(transport)
        stack.push_async_exit(opening.pop_all())  # all open: from here on the caller's stack closes them
    return Transports(transports, label, local)


async def open_session(
    config: Config,
    sink: AudioSink,
    progress: Progress = lambda message: None,
    on_event: Callable[[PipelineEvent], None] = lambda event: None,
) -> Session:
    """Open everything a chat needs; the session's `aclose` (its AsyncExitStack) closes it all, the sink included."""
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(_quietly, sink.close)
        opened = await open_transports(config, progress, stack)
        progress(f"loading the LLM ({llm_label(config)})")
        llm = llm_from_config(config)
        stack.push_async_callback(_aquietly, llm.aclose)
        load = getattr(llm, "load", None)  # embedded models load up front so the first answer does not wait
        if load is not None:
            await load()
        history = Conversation(max_turns=context_turns(config.llm))
        pipeline = VoicePipeline(llm, opened.by_mode, sink, pipeline_settings(config), history, on_event)
        await pipeline.read_ahead()  # ... nor for the system prompt to be read (LocalLLM.prefill)
        return Session(config, pipeline, opened.label, opened.local, opened.by_mode, stack.pop_all())
    raise AssertionError("unreachable")  # mypy: the stack above never swallows an exception


async def start_session(
    config: Config, *, mute: bool, out: Path | None, progress: Progress,
    on_event: Callable[[PipelineEvent], None] = lambda event: None, wanted: Callable[[], bool] = lambda: True,
) -> tuple[Session, str] | None:
    """The start-up every front end (the chat app, the demo, headless chat) shares: the sink (the speaker, or the
    audio kept and why nothing is heard), then the session. Returns it with that audio note; None when the front
    end went away (`wanted` turned false, e.g. a quit during the seconds the endpoint takes to warm up): the
    session is closed here then, since nothing else would. Raises STARTUP_ERRORS, which each front end shows."""
    sink, audio_note = open_sink(config, mute, out)
    session = await open_session(config, sink, progress, on_event)
    if not wanted():
        await session.aclose()
        return None
    return session, audio_note


def _quietly(close: Callable[[], None]) -> None:
    """A failure to release something at the end of a session must not hide why it ended."""
    with contextlib.suppress(Exception):
        close()


async def _aquietly(close: Callable[[], Awaitable[None]]) -> None:
    with contextlib.suppress(Exception):
        await close()
