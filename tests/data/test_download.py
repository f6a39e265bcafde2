"""Download step against a local HTTP server: Range resume, truncation, checksum manifest."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from localnmt.data.download import ChecksumError, download

PAYLOAD = bytes(range(256)) * 4000  # ~1 MB


class Handler(http.server.BaseHTTPRequestHandler):
    """Serves PAYLOAD with Range support; the first plain request can be cut short."""

    truncate_first = False
    requests: list[str | None] = []

    def do_GET(self):  # noqa: N802
        rng = self.headers.get("Range")
        type(self).requests.append(rng)
        start = int(rng.split("=")[1].split("-")[0]) if rng else 0
        body = PAYLOAD[start:]
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(len(body)))
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}")
        self.end_headers()
        if type(self).truncate_first and not rng:
            type(self).truncate_first = False
            self.wfile.write(body[: len(body) // 3])
            self.wfile.flush()
            self.connection.shutdown(2)  # connection dies mid-transfer
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    Handler.requests = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/file.tgz"
    srv.shutdown()
    srv.server_close()


def test_resume_existing_part_file(tmp_path, server):
    dest = tmp_path / "file.tgz"
    (tmp_path / "file.tgz.part").write_bytes(PAYLOAD[:100_000])
    download(server, dest, tmp_path / "m.json", log=lambda m: None)
    assert dest.read_bytes() == PAYLOAD
    assert Handler.requests == ["bytes=100000-"]


def test_resume_after_truncation(tmp_path, server):
    Handler.truncate_first = True
    dest = tmp_path / "file.tgz"
    logs: list[str] = []
    download(server, dest, tmp_path / "m.json", timeout=0.5, log=logs.append)
    assert dest.read_bytes() == PAYLOAD
    assert Handler.requests[0] is None and Handler.requests[-1].startswith("bytes=")
    assert any("resuming" in m for m in logs)


def test_checksum_recorded_then_verified(tmp_path, server):
    dest, manifest = tmp_path / "file.tgz", tmp_path / "m.json"
    download(server, dest, manifest, log=lambda m: None)
    entry = json.loads(manifest.read_text())["file.tgz"]
    assert entry["bytes"] == len(PAYLOAD) and len(entry["sha256"]) == 64
    logs: list[str] = []
    download(server, dest, manifest, log=logs.append)  # verified, not refetched
    assert any("[skip]" in m for m in logs) and len(Handler.requests) == 1
    dest.write_bytes(PAYLOAD[:-1] + b"X")  # corrupted on disk
    with pytest.raises(ChecksumError, match=r"is not the expected \w+ \(recorded in"):
        download(server, dest, manifest, log=lambda m: None)
    assert (tmp_path / "file.tgz.bad").exists()
