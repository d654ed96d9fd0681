"""scripts/audit: a real pip-audit run over the real ci.lock, against advisory services on loopback.

The OSV stand-in speaks OSV's query API (POST {"package": ..., "version": ...} -> {"vulns": [...]} or {}), the one
pip-audit's osv service calls; pointed there with AUDIT_OSV_PROBE. No test reaches the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "audit"
CLOSED = "http://127.0.0.1:9/"
"""The discard port: nothing listens there, so a connection is refused at once."""


class Advisories(BaseHTTPRequestHandler):
    """404 for every GET (what this machine's PyPI mirror answers for the JSON API); OSV queries answered from
    `vulnerable` (canonical name -> advisory id)."""

    vulnerable: dict[str, str] = {}
    queried: list[str] = []

    def do_GET(self) -> None:
        self.send_error(404)

    def do_POST(self) -> None:
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name, version = query["package"]["name"], query["version"]
        type(self).queried.append(name)
        answer: dict[str, object] = {}
        if name in self.vulnerable:
            answer = {"vulns": [{"id": self.vulnerable[name], "summary": "stand-in advisory", "affected": [
                {"package": {"name": name, "ecosystem": "PyPI"},
                 "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": version + ".post1"}]}]}]}]}
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def advisories() -> Iterator[str]:
    Advisories.vulnerable, Advisories.queried = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Advisories)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def audit(tmp_path: Path, pypi: str, osv: str) -> tuple[subprocess.CompletedProcess[str], str]:
    output = tmp_path / "pip-audit.txt"
    env = {**os.environ, "AUDIT_OUTPUT": str(output), "AUDIT_PYPI_PROBE": pypi, "AUDIT_OSV_PROBE": osv,
           "PYTHON": sys.executable, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    result = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
    return result, output.read_text(encoding="utf-8")


def test_no_reachable_service_is_reported_as_not_audited(tmp_path: Path, advisories: str) -> None:
    result, record = audit(tmp_path, pypi=f"{advisories}/pypi/pip/20.0/json", osv=CLOSED)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "NOT AUDITED" in result.stderr
    assert "RESULT: NOT AUDITED" in record and "-> HTTP 404" in record and "Connection refused" in record
    assert "# date: 20" in record and "sha256 " in record
    assert "No known vulnerabilities" not in record


def test_a_clean_audit_queries_every_locked_package(tmp_path: Path, advisories: str) -> None:
    result, record = audit(tmp_path, pypi=CLOSED, osv=f"{advisories}/v1/query")
    assert result.returncode == 0, record
    assert "RESULT: AUDITED with service osv: no known vulnerabilities" in record
    locked = {line.split("==")[0] for line in (ROOT / "requirements" / "ci.lock").read_text().splitlines()
              if line[:1].isalnum()}
    assert {"torch", "phonemizer"} <= locked and locked <= set(Advisories.queried)


def test_a_known_vulnerability_fails_the_audit(tmp_path: Path, advisories: str) -> None:
    Advisories.vulnerable = {"lameenc": "PYSEC-0000-0001"}
    result, record = audit(tmp_path, pypi=CLOSED, osv=f"{advisories}/v1/query")
    assert result.returncode == 1
    assert "FAILED" in record and "PYSEC-0000-0001" in record and "lameenc" in record
