"""Render docs/screenshot.png from a real conversation: the real app, endpoint and LLM, driven by Textual's Pilot.

Run: .venv/bin/python scripts/screenshot.py   (needs rsvg-convert: apt-get install librsvg2-bin)
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from voicecli.config import Config
from voicecli.tui.chat_app import VoiceChatApp
from voicecli.tui.widgets import StatusBar

OUT = Path(__file__).resolve().parents[1] / "docs"


async def main() -> None:
    app = VoiceChatApp(Config.load(), mute=True)
    async with app.run_test(size=(120, 34)) as pilot:
        status = app.query_one(StatusBar)
        while status.state not in ("idle", "error"):
            await asyncio.sleep(0.1)
        for message in ("Why is the sky blue?", "And why are sunsets red?"):
            await pilot.press(*message, "enter")
            await asyncio.sleep(0.5)
            while status.state != "idle":
                await asyncio.sleep(0.1)
        await pilot.pause()
        svg = OUT / "screenshot.svg"
        app.save_screenshot(str(svg.name), path=str(OUT))
        await pilot.press("ctrl+q")
    subprocess.run(["rsvg-convert", "-o", str(OUT / "screenshot.png"), str(svg)], check=True)
    svg.unlink()
    print(OUT / "screenshot.png", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
