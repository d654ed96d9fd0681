"""POST /v1/audio/speech on the real server process, called the way OpenAI's Python client calls it.

The `openai` package is not installed in this project's environment, so the requests are made with httpx at the
wire, with what that client sends for `client.audio.speech.create(...)` (and `.with_streaming_response`): a JSON
body, `Authorization: Bearer <api key>` and `Accept: application/octet-stream`.
"""

from __future__ import annotations

import io
import wave

import httpx
import pytest
from voicecli_endpoint.app import ROUTES

from tests.conftest import RunningServer
from tests.endpoint.helpers import assert_whole_mp3_frames
from voicecli.wire.protocol import CONTENT_TYPES, SAMPLE_RATE, ErrorCode

pytestmark = pytest.mark.slow

OPENAI_HEADERS = {"Authorization": "Bearer sk-not-checked-without-a-token", "Accept": "application/octet-stream",
                  "User-Agent": "OpenAI/Python 1.99.0"}
TEXT = "Hello there. This is a test."


def _speech(server: RunningServer, body: dict[str, object]) -> httpx.Response:
    return httpx.post(f"{server.http_url}/v1/audio/speech", json=body, headers=OPENAI_HEADERS, timeout=120.0)


def _wav_samples(data: bytes) -> bytes:
    with wave.open(io.BytesIO(data)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (SAMPLE_RATE, 1, 2)
        return wav.readframes(wav.getnframes())


def test_the_route_is_declared() -> None:
    assert any(getattr(route, "path", None) == "/v1/audio/speech" for route in ROUTES)


def test_wav_is_the_same_audio_as_invocations(server: RunningServer) -> None:
    speech = _speech(server, {"model": "tts-1", "input": TEXT, "voice": "am_michael", "response_format": "wav",
                              "speed": 1.2, "stream": False})
    assert speech.status_code == 200, speech.text
    assert speech.headers["content-type"] == CONTENT_TYPES["wav"]
    reference = httpx.post(f"{server.http_url}/invocations", timeout=120.0,
                           json={"text": TEXT, "voice": "am_michael", "speed": 1.2, "format": "wav"})
    samples = _wav_samples(speech.content)
    assert len(samples) > SAMPLE_RATE  # over half a second of speech
    assert samples == _wav_samples(reference.content)


def test_default_is_streamed_mp3(server: RunningServer) -> None:
    with httpx.stream("POST", f"{server.http_url}/v1/audio/speech", headers=OPENAI_HEADERS, timeout=120.0,
                      json={"model": "kokoro", "input": TEXT, "voice": "af_heart"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "audio/mpeg"
        assert "content-length" not in response.headers  # chunked: audio flows while later sentences synthesize
        parts = list(response.iter_bytes())
    assert assert_whole_mp3_frames(b"".join(parts)) > 0


def test_pcm_is_raw_samples(server: RunningServer) -> None:
    pcm = _speech(server, {"model": "tts-1", "input": "Hi.", "voice": "af_heart", "response_format": "pcm",
                           "stream": False})
    assert pcm.status_code == 200 and pcm.headers["content-type"] == CONTENT_TYPES["pcm16"]
    wav = _speech(server, {"model": "tts-1", "input": "Hi.", "voice": "af_heart", "response_format": "wav",
                           "stream": False})
    assert pcm.content == _wav_samples(wav.content) and len(pcm.content) % 2 == 0


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"model": "tts-1", "input": "Hi.", "voice": "alloy"}, 400, ErrorCode.UNKNOWN_VOICE),
    ({"model": "tts-1", "input": "Hi.", "voice": "af_heart", "response_format": "opus"}, 400,
     ErrorCode.UNKNOWN_FORMAT),
    ({"model": "tts-1", "input": "Hi.", "voice": "af_heart", "speed": 4.0}, 400, ErrorCode.BAD_SPEED),
    ({"model": "tts-1", "voice": "af_heart"}, 400, ErrorCode.EMPTY_TEXT),
    ({"model": "tts-1", "input": "x" * 2001, "voice": "af_heart"}, 400, ErrorCode.TEXT_TOO_LONG),
])
def test_bad_requests_get_the_usual_4xx(server: RunningServer, body: dict[str, object], status: int,
                                        code: ErrorCode) -> None:
    response = _speech(server, body)
    assert response.status_code == status
    error = response.json()
    assert error["code"] == code and error["message"]
    if code == ErrorCode.UNKNOWN_VOICE:
        assert "'alloy'" in error["message"] and "af_heart" in error["message"]


def test_a_web_page_cannot_use_it_without_a_token(server: RunningServer) -> None:
    response = httpx.post(f"{server.http_url}/v1/audio/speech", json={"input": "Hi.", "voice": "af_heart"},
                          headers={"Origin": "https://evil.example"}, timeout=60.0)
    assert response.status_code == 403 and response.json()["code"] == ErrorCode.FORBIDDEN_ORIGIN
