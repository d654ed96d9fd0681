"""The HTTP routes of the real server process: /ping, POST /invocations (batch and streamed), /stats."""

from __future__ import annotations

import io
import struct
import time
import wave
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer
from tests.endpoint.helpers import assert_whole_mp3_frames, mp3_duration_s, send_chunked_until_answered
from voicecli.wire.protocol import CONTENT_TYPES, DEFAULTS, SAMPLE_RATE

pytestmark = pytest.mark.slow

BODY = {"text": "Hi.", "speed": 2.0}


def _post(server: RunningServer, body: object, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{server.http_url}/invocations", json=body, headers=headers, timeout=120.0)


def test_ping_says_ok_once_warm(server: RunningServer) -> None:
    response = httpx.get(f"{server.http_url}/ping")
    assert response.status_code == 200 and response.text == "OK"


def test_stats_reports_the_loaded_engine(server: RunningServer) -> None:
    stats = httpx.get(f"{server.http_url}/stats").json()
    assert stats["ready"] is True and stats["engine"] == "onnx" and stats["voices"] == 54
    assert stats["warmup_s"] > 0


def test_batch_wav_with_timing_headers(server: RunningServer) -> None:
    response = _post(server, {**BODY, "format": "wav"})
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPES["wav"]
    with wave.open(io.BytesIO(response.content)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (SAMPLE_RATE, 1, 2)
        seconds = wav.getnframes() / SAMPLE_RATE
    assert seconds > 0
    assert float(response.headers["x-audio-seconds"]) == pytest.approx(seconds, abs=0.001)
    assert float(response.headers["x-inference-time-ms"]) > 0
    rtf = float(response.headers["x-rtf"])
    assert rtf == pytest.approx(float(response.headers["x-inference-time-ms"]) / 1000 / seconds, rel=0.01)


def test_default_format_is_wav(server: RunningServer) -> None:
    response = _post(server, BODY)
    assert response.status_code == 200 and response.content[:4] == b"RIFF"


def test_batch_mp3_is_whole_frames(server: RunningServer) -> None:
    response = _post(server, {**BODY, "format": "mp3"})
    assert response.status_code == 200 and response.headers["content-type"] == "audio/mpeg"
    assert assert_whole_mp3_frames(response.content) > 0
    assert mp3_duration_s([response.content]) == pytest.approx(float(response.headers["x-audio-seconds"]),
                                                               abs=0.15)


def test_batch_pcm16(server: RunningServer) -> None:
    response = _post(server, {**BODY, "format": "pcm16"})
    assert response.status_code == 200 and response.headers["content-type"] == CONTENT_TYPES["pcm16"]
    assert len(response.content) % 2 == 0
    # X-Audio-Seconds is given to the millisecond; trimmed pieces are any number of samples long.
    assert len(response.content) / 2 / SAMPLE_RATE == pytest.approx(float(response.headers["x-audio-seconds"]),
                                                                    abs=0.0005)


def test_streamed_mp3(server: RunningServer) -> None:
    with httpx.stream("POST", f"{server.http_url}/invocations", json={**BODY, "format": "mp3", "stream": True},
                      timeout=120.0) as response:
        assert response.status_code == 200
        assert "content-length" not in response.headers  # chunked: audio goes out as it is made
        data = b"".join(response.iter_bytes())
    assert assert_whole_mp3_frames(data) > 0 and mp3_duration_s([data]) > 0.2


def test_accept_header_asks_for_a_stream(server: RunningServer) -> None:
    response = _post(server, {**BODY, "format": "wav"}, headers={"Accept": "audio/wav; stream=true"})
    assert response.status_code == 200 and "content-length" not in response.headers
    riff_size, = struct.unpack_from("<I", response.content, 4)
    assert riff_size == 0xFFFFFFFF  # a streaming WAV header: sizes unknown when it was sent
    assert len(response.content) > 44


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"text": ""}, "empty_text"),
        ({"text": "Hi.", "voice": "nobody"}, "unknown_voice"),
        ({"text": "Hi.", "speed": 0.1}, "bad_speed"),
        ({"text": "Hi.", "format": "flac"}, "unknown_format"),
        ({"text": "Hi.", "stream": "yes"}, "bad_field"),
        ({"text": "x" * (DEFAULTS.limits.max_text_chars + 1)}, "text_too_long"),
        ([1], "not_an_object"),
    ],
)
def test_bad_body_is_a_4xx_json_error(server: RunningServer, body: object, code: str) -> None:
    response = _post(server, body)
    assert response.status_code == 400
    assert response.json()["code"] == code and response.json()["message"]


def test_malformed_and_oversized_bodies(server: RunningServer) -> None:
    url = f"{server.http_url}/invocations"
    malformed = httpx.post(url, content=b"{nope", timeout=30)
    assert malformed.status_code == 400 and malformed.json()["code"] == "malformed_json"
    huge = httpx.post(url, content=b" " * (DEFAULTS.limits.max_frame_bytes + 1), timeout=30)
    assert huge.status_code == 413 and huge.json()["code"] == "frame_too_large"


# ---------------------------------------------------------------------------------------------------- hardening
# (issue 17: what an outside probe of POST /invocations broke)


def test_a_huge_integer_is_a_400_not_a_bare_500(server: RunningServer) -> None:
    response = httpx.post(f"{server.http_url}/invocations", content=b'{"text": "Hi.", "speed": ' + b"9" * 5000 + b"}",
                          timeout=30)
    assert response.status_code == 400 and response.json()["code"] == "malformed_json"


def test_a_lone_surrogate_is_a_400_not_a_codec_500(server: RunningServer) -> None:
    response = httpx.post(f"{server.http_url}/invocations", content=b'{"text": "Hi \\ud800."}', timeout=30)
    assert response.status_code == 400 and response.json()["code"] == "invalid_utf8"


def test_a_chunked_body_over_the_limit_is_refused_while_it_arrives(server: RunningServer) -> None:
    """No Content-Length: before the fix the whole body was read into memory first (see test_memory.py)."""
    sent, answer = send_chunked_until_answered(server.port, 128 * 1024 * 1024)
    assert answer.startswith(b"HTTP/1.1 413") and b"frame_too_large" in answer, answer[:200]
    assert sent < 16 * 1024 * 1024, f"the server took {sent} bytes before refusing"
    assert _post(server, BODY).status_code == 200


@pytest.mark.parametrize("audio_format", ["wav", "mp3", "pcm16"])
@pytest.mark.parametrize("stream", [False, True])
def test_text_with_nothing_speakable_is_an_empty_well_formed_answer(server: RunningServer, audio_format: str,
                                                                   stream: bool) -> None:
    """Before the fix mp3 gave a 500 (batch) or a 200 whose body was cut off (stream)."""
    with httpx.stream("POST", f"{server.http_url}/invocations", timeout=120,
                      json={"text": "?! ... (((", "format": audio_format, "stream": stream}) as response:
        data = response.read()  # raises RemoteProtocolError when the chunked body is cut off
    assert response.status_code == 200
    if audio_format == "wav":
        assert data[:4] == b"RIFF" and len(data) == 44  # a header, no samples
    else:
        assert data == b""


def _stats(server: RunningServer) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{server.http_url}/stats", timeout=30).json()
    return stats


def _pieces_settle(server: RunningServer, quiet_s: float = 4.0, timeout_s: float = 60.0) -> int:
    """Wait until no piece has been synthesized for `quiet_s`; the count then. Fails if synthesis never stops."""
    deadline = time.monotonic() + timeout_s
    last = _stats(server)["pieces_synthesized"]
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = _stats(server)["pieces_synthesized"]
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return int(now)
    raise AssertionError(f"synthesis still running {timeout_s:.0f} s after the client went away")


LONG_TEXT = " ".join(f"This is sentence number {n} of a long text nobody will wait for." for n in range(1, 25))


@pytest.mark.parametrize("stream", [False, True])
def test_a_post_whose_client_goes_away_stops_being_synthesized(server: RunningServer, stream: bool) -> None:
    """Before the fix a batch POST went on synthesizing all its 24 sentences (~20 s) for nobody."""
    before = _stats(server)
    if stream:
        with httpx.stream("POST", f"{server.http_url}/invocations", json={"text": LONG_TEXT, "stream": True},
                          timeout=120) as response:
            assert response.status_code == 200
            next(response.iter_bytes())  # the first audio: then the client leaves, closing the connection
    else:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{server.http_url}/invocations", json={"text": LONG_TEXT}, timeout=3.0)
    # The connection is closed; the server notices and stops after at most the piece being synthesized.
    after = _pieces_settle(server)
    ran = after - before["pieces_synthesized"]
    assert ran < 12, f"{ran} of 24 pieces were synthesized for a client that had gone"
    stats = _stats(server)
    assert stats["http_abandoned"] > before["http_abandoned"] and stats["active_requests"] == 0


@pytest.mark.parametrize("stream", [False, True])
def test_a_number_too_long_to_read_is_spelled_digit_by_digit(server: RunningServer, stream: bool) -> None:
    """Issue 23: 307+ digits overflowed num2words inside G2P: a 500 quoting the whole number, or (streamed) a 200
    whose body was cut, with an ASGI traceback. Now spelled digit by digit (g2p.MAX_NUMBER_DIGITS)."""
    response = _post(server, {"text": "9" * 307, "stream": stream, "format": "pcm16", "speed": 2.0})
    assert response.status_code == 200, response.text[:300]
    assert len(response.content) / 2 / SAMPLE_RATE > 30  # 307 "nine"s, even at twice the speed


def test_a_number_too_long_to_speak_is_refused_briefly(server: RunningServer) -> None:
    response = _post(server, {"text": "9" * 1999, "stream": True})
    assert response.status_code == 400 and response.json()["code"] == "text_too_long"
    assert len(response.text) < 300  # no echo of the number
