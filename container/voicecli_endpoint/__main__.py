"""`python -m voicecli_endpoint`: the container entrypoint (called with --host 0.0.0.0).

Its options are voicecli.wire.server_options', the very ones `voicecli serve` takes; an option not given gets the
server's built-in default.
"""

from __future__ import annotations

from voicecli.wire.server_options import ServerOptions
from voicecli_endpoint.server import serve


def parse_options(argv: list[str] | None = None) -> ServerOptions:
    return ServerOptions.from_argv(argv, prog="python -m voicecli_endpoint", description="Kokoro-82M TTS endpoint")


def main(argv: list[str] | None = None) -> None:
    serve(parse_options(argv))


if __name__ == "__main__":
    main()
