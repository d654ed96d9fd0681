"""Whether the end of turn or the answer's own making decided when saved `voicecli bench turns` runs were heard.

For each results.json given: per mode, the answers whose first audio byte came in before the turn was confirmed
(ready, held for the end-of-turn verdict) and the p50 of first audio byte minus turn confirmed, computed by the
same function the bench now reports them with (voicecli.bench.turns.audio_against_verdict), so runs saved before
it existed read the same way. Usage: .venv/bin/python scripts/turns_verdict.py results/bench/turns-*/results.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from voicecli.bench.report import Sample
from voicecli.bench.turns import audio_against_verdict


def main(paths: list[Path]) -> int:
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        samples = [Sample(s["variant"], s["rtt_ms"], s["run"], s["metrics"], s["detail"]) for s in data["samples"]]
        for mode in sorted({s.variant for s in samples}):
            held, after = audio_against_verdict([s for s in samples if s.variant == mode])
            figure = "no answer with both marks" if after is None else (
                f"{held} of {after.count} answers held for the end of turn; first audio byte "
                f"{after.p50:,.0f} ms after it (p50)")
            print(f"{data['name']} {mode}: {figure}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main([Path(arg) for arg in sys.argv[1:]]))
