"""What keeps the assistant from hearing itself, chosen once from audio.echo: the echo canceller in front of the
voice detector, the level gate, or nothing.

Why here and not in listener.py: the choice needs the speaker's player (to tap what it plays) and the binding's
availability, and it falls back in steps ("aec" -> "gate") that doctor and the log must be able to state. The
player is reached through the sink the front end already hands the listener, by duck typing (`ReferenceTap`):
listen/ never imports playback/ (siblings), and the shared type, FarEndReference, lives in audio/.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from voicecli.audio.echo_cancel import EchoCanceller, EchoCancellerUnavailable
from voicecli.audio.echo_dump import EchoDump
from voicecli.audio.far_end import FarEndReference
from voicecli.config import Config
from voicecli.listen.microphone import AudioBlock

__all__ = ["EchoPath", "ReferenceTap", "open_echo_path"]

log = logging.getLogger(__name__)


@runtime_checkable
class ReferenceTap(Protocol):
    """A player that can hand what it plays to a far-end reference (voicecli.playback.player.Player.tap)."""

    def tap(self, reference: FarEndReference | None) -> None: ...


@dataclass
class EchoPath:
    """The active defence: `mode` is what runs ("aec", "gate", "off"), `note` why when it is not what was asked."""

    mode: str
    canceller: EchoCanceller | None = None
    note: str = ""

    def clean(self, block: AudioBlock) -> AudioBlock:
        """A microphone block with the echo removed (unchanged unless the canceller runs)."""
        if self.canceller is None:
            return block
        samples, at = self.canceller.process(block.samples, block.at)
        return AudioBlock(samples, at)

    def double_talk(self) -> bool:
        """True while the canceller, relied on (`gate_open`), hears more than the answer's echo: a voice under it
        (voicecli.audio.double_talk). The listener holds the answer's voice on it."""
        canceller = self.canceller
        return canceller is not None and self.gate_open() and canceller.double_talk

    def leaking(self) -> bool:
        """True while the canceller's output is echo it let through (voicecli.audio.echo_cancel.LEAK_COHERENCE): the
        level gate mutes it while the assistant speaks, whatever its level."""
        canceller = self.canceller
        return canceller is not None and canceller.leaking

    def gate_open(self) -> bool:
        """True while the canceller is trusted, has adapted to the room (its first ~1.5 s of far end lets echo
        through), knows whether there is an echo at all (found, or a capture that stayed quiet while the far end
        played) and has confirmed the echo's delay since the output stream last restarted (`settled`): the level
        gate then lets everything through. Until then the gate guards, as with "gate"."""
        canceller = self.canceller
        return (canceller is not None and canceller.trusted and canceller.converged and canceller.settled
                and (canceller.echo_heard or canceller.echo_absent))


def open_echo_path(config: Config, sink: object) -> EchoPath:
    """The echo defence audio.echo asks for, or the level gate when "aec" cannot run (said once in the log)."""
    wanted = config.audio.echo
    if wanted != "aec":
        return EchoPath(wanted)
    player = getattr(sink, "player", None)
    if not isinstance(player, ReferenceTap):
        return EchoPath("off", note="nothing is played through a speaker (muted or saved): no echo to cancel")
    try:
        reference = FarEndReference()
        canceller = EchoCanceller(reference, noise_suppression=config.audio.echo_noise_suppression)
    except EchoCancellerUnavailable as exc:
        log.warning("echo cancellation is off, the level gate is used instead: %s", exc)
        return EchoPath("gate", note=str(exc))
    if config.audio.echo_dump:  # only once the canceller runs: no empty dump folder without its binding
        canceller.dump = EchoDump(Path(config.audio.echo_dump).expanduser())
    player.tap(reference)
    return EchoPath("aec", canceller)
