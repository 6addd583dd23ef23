"""A small WebSocket client (RFC 6455) on the standard library, for the agent's /ws live updates.

It does what a client must and no more: the HTTP upgrade with a checked Sec-WebSocket-Accept, masked
client frames, text messages (fragmented or not), answering pings, and the closing handshake.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import struct
import urllib.parse
from typing import Any, Dict, Optional

from . import _transport
from .errors import AgentUnavailable

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_MESSAGE = 16 * 1024 * 1024


class WebSocket:
    """A connected client. recv_json() returns the next text message as JSON, or None on timeout."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 5.0) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "ws"):
            raise AgentUnavailable(f"live updates need a plain http:// agent URL, not {url}")
        host, port = u.hostname or "127.0.0.1", u.port or 80
        _transport.check_token_transport(url, token)
        path = (u.path or "/") + ("?" + u.query if u.query else "")
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise AgentUnavailable(f"no agent answers at {host}:{port} ({e})") from e
        self._buf = b""
        self.closed = False
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if token:
            lines.append(f"Authorization: Bearer {token}")
        try:
            self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            head = self._read_until(b"\r\n\r\n").decode("latin-1")
        except OSError as e:
            self._sock.close()
            raise AgentUnavailable(f"the WebSocket handshake with {host}:{port} failed ({e})") from e
        status, *header_lines = head.split("\r\n")
        headers = {}
        for h in header_lines:
            name, _, value = h.partition(":")
            headers[name.strip().lower()] = value.strip()
        expect = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if " 101 " not in status + " " or headers.get("sec-websocket-accept") != expect:
            self._sock.close()
            raise AgentUnavailable(f"{url} refused the WebSocket upgrade ({status})")

    def _read_until(self, marker: bytes) -> bytes:
        while marker not in self._buf:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self._buf += chunk
            if len(self._buf) > 65536 and marker == b"\r\n\r\n":
                raise ConnectionError("handshake answer too long")
        out, self._buf = self._buf.split(marker, 1)
        return out

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise ConnectionError("connection closed")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def send(self, opcode: int, payload: bytes = b"") -> None:
        """One final frame, masked as RFC 6455 requires of a client."""
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self._sock.sendall(head + mask + masked)

    def send_json(self, doc: Dict[str, Any]) -> None:
        self.send(OP_TEXT, json.dumps(doc).encode())

    def _frame(self):
        b0, b1 = self._read_exact(2)
        fin, opcode = bool(b0 & 0x80), b0 & 0x0F
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read_exact(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read_exact(8))[0]
        if n > MAX_MESSAGE:
            raise ConnectionError("frame too large")
        mask = self._read_exact(4) if b1 & 0x80 else None  # a server must not mask; accept it anyway
        payload = self._read_exact(n)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return fin, opcode, payload

    def recv_json(self, timeout: float) -> Optional[Any]:
        """The next text message, parsed; None when nothing came within TIMEOUT seconds. Raises
        ConnectionError when the server closes."""
        self._sock.settimeout(timeout)
        parts = []
        try:
            while True:
                fin, opcode, payload = self._frame()
                if opcode == OP_PING:
                    self.send(OP_PONG, payload)
                    continue
                if opcode == OP_PONG:
                    continue
                if opcode == OP_CLOSE:
                    if not self.closed:
                        self.closed = True
                        self.send(OP_CLOSE, payload[:2])
                    raise ConnectionError("the agent closed the WebSocket")
                parts.append(payload)
                if sum(len(p) for p in parts) > MAX_MESSAGE:
                    raise ConnectionError("message too large")
                if fin:
                    return json.loads(b"".join(parts).decode())
        except socket.timeout:
            if parts:  # a message cut in the middle cannot be resumed
                raise ConnectionError("the agent stopped in the middle of a message")
            return None

    def close(self) -> None:
        """The closing handshake (best effort), then the socket."""
        try:
            if not self.closed:
                self.closed = True
                self.send(OP_CLOSE, struct.pack("!H", 1000))
                self._sock.settimeout(1.0)
                while True:  # wait for the server's close frame
                    _, opcode, _ = self._frame()
                    if opcode == OP_CLOSE:
                        break
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            self._sock.close()
