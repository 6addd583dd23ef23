"""The package believes only root's agent socket or its own (issue 20, finding 8)."""
from __future__ import annotations

import os
import socket

import pytest

from gpufleet import _transport
from gpufleet.errors import AgentUnavailable

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="plants a socket as another user")


@needs_root
def test_socket_served_by_another_user_is_refused(tmp_path):
    tmp_path.chmod(0o777)
    path = str(tmp_path / "agent.sock")
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the planter: listens as nobody, greets like an agent
        try:
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            os.setuid(NOBODY)
            srv.listen(1)
            os.write(ready_w, b"x")
            conn, _ = srv.accept()
            conn.sendall(b'{"hello":"gpufleet-agent"}\n')
            conn.recv(1)
        finally:
            os._exit(0)
    try:
        os.read(ready_r, 1)
        with pytest.raises(AgentUnavailable, match="neither root nor you"):
            _transport.AgentSocket(path)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


@needs_root
def test_own_socket_directory_owned_by_another_user_is_skipped(tmp_path, monkeypatch):
    planted = tmp_path / "gpufleet"
    planted.mkdir()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(planted / "agent.sock"))
    try:
        monkeypatch.delenv("GPUFLEET_SOCKET", raising=False)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
        assert _transport.socket_path() == str(planted / "agent.sock")
        os.chown(planted, NOBODY, NOBODY)
        assert _transport.socket_path() != str(planted / "agent.sock")
    finally:
        sock.close()
