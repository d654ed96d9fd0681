"""One stretch of a kept session, block by block as the app's canceller processed it: the capture's, the output's and
the far end's levels, the output's coherence with the far end (echo_coherence.py's measure, a value per 10 ms), and
the canceller's state (settled, trusted, double talk). Times are seconds into one of the run's turns.
Usage: .venv/bin/python results/bench/echo-coherence-20261206/trace.py KEEP_DIR RUN_DIR SESSION SAMPLE FROM_S TO_S
(SESSION: e.g. aec-80ms; SAMPLE: the turn's index in the run's results.json). The two traces quoted in results.md:
  /tmp/keepH results/bench/duplex-20261206-sure aec-120ms 27 10.45 10.85
  /tmp/keepJ results/bench/duplex-20261206-block10-rep aec-80ms 19 8.9 9.45
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from echo_coherence import output_coherence
from false_holds import session_samples, wall_offset

from voicecli.audio.echo_dump import COLUMNS, load_dump
from voicecli.audio.levels import rms_dbfs
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import load_session


def main(arguments: list[str]) -> int:
    keep, run, stem, sample, start, stop = arguments
    results = json.loads((Path(run) / "results.json").read_text())
    path = Path(keep) / f"{stem}.npz"
    session, _ = load_session(path)
    offset = wall_offset(session, session_samples(path, results))
    base = results["samples"][int(sample)]["detail"]["played_at_wall"] - offset
    audio, blocks = load_dump(path.with_suffix(""))
    out, coherence = output_coherence(path.with_suffix(""))
    ends = np.cumsum(blocks[:, COLUMNS.index("samples")]).astype(int)
    state = [COLUMNS.index(name) for name in ("settled", "trusted", "double_talk")]
    print("s\tcapture\toutput\tfar\tcoherence\tsettled trusted double_talk")
    for row, end in zip(blocks, ends, strict=True):
        at = row[COLUMNS.index("at")] - base
        if not float(start) <= at <= float(stop):
            continue
        span = slice(end - int(row[COLUMNS.index("samples")]), end)
        scored = coherence[span][coherence[span] > 0] - 1.0
        shown = " ".join(f"{v:.2f}" for v in scored[:: SPEECH_RATE // 100]) if len(scored) else "-"
        print(f"{at:.3f}\t{rms_dbfs(audio['capture'][span]):.1f}\t{rms_dbfs(out[span]):.1f}\t"
              f"{rms_dbfs(audio['far'][span]):.1f}\t{shown}\t{' '.join(str(int(row[i])) for i in state)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 7:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
