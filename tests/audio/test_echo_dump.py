"""The echo canceller's dump (voicecli.audio.echo_dump): what it writes is what the canceller was fed, block by
block, so a live session's own inputs can be replayed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.audio.echo_mixtures import mixture, speech
from tests.audio.test_echo_cancel import run
from voicecli.audio.double_talk import DoubleTalkDetector
from voicecli.audio.echo_cancel import EchoCanceller
from voicecli.audio.echo_dump import COLUMNS, EchoDump, load_dump
from voicecli.audio.far_end import FarEndReference


def test_the_dump_holds_the_capture_the_far_ends_and_the_state(tmp_path: Path) -> None:
    mix = mixture(speech("q01.wav", "q03.wav"), None, 0.08, 0.0)
    dump = EchoDump(tmp_path / "dump")
    out, canceller = run(mix, EchoCanceller(FarEndReference(), dump=dump))
    dump.close()
    audio, blocks = load_dump(tmp_path / "dump")
    assert blocks.shape[1] == len(COLUMNS)
    assert int(blocks[:, COLUMNS.index("samples")].sum()) == len(audio["capture"]) == len(out)
    assert np.array_equal(audio["capture"], mix.capture[: len(out)])  # fed as it came, whole frames in order
    assert len(audio["far"]) == len(audio["far_dtd"]) == len(out)
    assert np.array_equal(audio["out"], out)  # what the canceller handed on
    aligned = blocks[:, COLUMNS.index("aligned")]
    assert aligned[0] == -1 and aligned[-1] == canceller._aligned  # found on the way, as the canceller did
    assert not np.any(audio["far_dtd"][: int(blocks[aligned < 0, 2].sum())])  # silent until a delay was aligned
    # replayed, the double-talk detector's inputs give the flags the canceller had (here none: the echo alone)
    detector = DoubleTalkDetector()
    assert not blocks[:, COLUMNS.index("double_talk")].any()
    start = 0
    for row in blocks:
        size = int(row[COLUMNS.index("samples")])
        if row[COLUMNS.index("aligned")] >= 0:
            detector.feed(audio["capture"][start : start + size], audio["far_dtd"][start : start + size])
            assert not detector.near_end
        start += size
