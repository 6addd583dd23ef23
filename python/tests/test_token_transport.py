"""The token never leaves by a redirect, a proxy or plain http to another host (issue 20, finding 9)."""
from __future__ import annotations

import http.server
import threading
import urllib.request

import pytest

from gpufleet import _transport, _ws
from gpufleet.errors import GpufleetError


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list = []
    redirect_to = ""

    def do_GET(self):  # noqa: N802
        type(self).seen.append((self.server.server_address, self.path, self.headers.get("Authorization")))
        if self.redirect_to and self.path != "/final":
            self.send_response(302)
            self.send_header("Location", self.redirect_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _serve(host, handler):
    srv = http.server.HTTPServer((host, 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_redirect_to_another_loopback_host_gets_no_token(monkeypatch):
    class Other(_Recorder):
        seen = []

    other = _serve("127.0.0.2", Other)

    class First(_Recorder):
        seen = []
        redirect_to = f"http://127.0.0.2:{other.server_address[1]}/final"

    first = _serve("127.0.0.1", First)
    try:
        monkeypatch.setenv("GPUFLEET_URL", f"http://127.0.0.1:{first.server_address[1]}")
        monkeypatch.setenv("GPUFLEET_TOKEN", "s3cret")
        try:
            _transport.http_json("GET", "/x")
        except GpufleetError:
            pass
        assert First.seen and First.seen[0][2] == "Bearer s3cret"
        assert all(auth is None for _, _, auth in Other.seen)
    finally:
        first.shutdown()
        other.shutdown()


def test_loopback_agent_is_never_reached_through_a_proxy(monkeypatch):
    class Proxy(_Recorder):
        seen = []

    class Agent(_Recorder):
        seen = []

    proxy, agent = _serve("127.0.0.1", Proxy), _serve("127.0.0.1", Agent)
    try:
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.setenv("no_proxy", "")
        monkeypatch.setattr(urllib.request, "_opener", None)  # urlopen's cached opener read the old env
        monkeypatch.setenv("GPUFLEET_URL", f"http://127.0.0.1:{agent.server_address[1]}")
        monkeypatch.setenv("GPUFLEET_TOKEN", "s3cret")
        assert _transport.http_json("GET", "/x")[0] == 200
        assert Proxy.seen == [] and len(Agent.seen) == 1
    finally:
        proxy.shutdown()
        agent.shutdown()


def test_token_is_not_sent_in_clear_to_another_host(monkeypatch):
    monkeypatch.setenv("GPUFLEET_URL", "http://gpu-node.example:9400")
    monkeypatch.setenv("GPUFLEET_TOKEN", "s3cret")
    with pytest.raises(GpufleetError, match="in clear"):
        _transport.http_json("GET", "/x")
    with pytest.raises(GpufleetError, match="in clear"):
        _ws.WebSocket("http://gpu-node.example:9400/ws", token="s3cret")
