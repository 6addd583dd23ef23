"""How the package reaches gpufleet: the agent's HTTP API, its Unix socket, or the binary.

Everything is read from the environment on each call, so a long-running program follows a changed
GPUFLEET_URL and tests can point one process at several agents.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import struct
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

from .errors import AgentUnavailable, GpufleetError

DEFAULT_URL = "http://127.0.0.1:9401"
HTTP_TIMEOUT_S = 10.0
# The agent socket's limits (docs/agent-socket.md): the greeting within 3 s, a sign of life every second
# while a request waits, so 5 s of silence means the agent is stuck.
SOCKET_CONNECT_TIMEOUT_S = 3.0
SOCKET_SILENCE_S = 5.0


def agent_url() -> str:
    """The agent's base URL: $GPUFLEET_URL, else the agent's default address."""
    return (os.environ.get("GPUFLEET_URL") or DEFAULT_URL).rstrip("/")


def _headers() -> Dict[str, str]:
    h = {"Accept": "application/json"}
    token = os.environ.get("GPUFLEET_TOKEN")
    if token:
        h["Authorization"] = "Bearer " + token.strip()
    return h


def is_loopback(host: Optional[str]) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_token_transport(url: str, token: Optional[str]) -> None:
    """Refuses to send the token in clear to a host that is not this machine."""
    u = urllib.parse.urlsplit(url)
    if token and u.scheme in ("http", "ws") and not is_loopback(u.hostname):
        raise GpufleetError(f"not sending GPUFLEET_TOKEN in clear to {u.hostname}: use https:// "
                            "or a loopback agent URL")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """An authenticated request never follows a redirect: the token must not reach another host."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


def _opener(url: str, authenticated: bool) -> urllib.request.OpenerDirector:
    handlers: List[Any] = []
    if is_loopback(urllib.parse.urlsplit(url).hostname):
        handlers.append(urllib.request.ProxyHandler({}))  # never through $http_proxy to a local agent
    if authenticated:
        handlers.append(_NoRedirect())
    return urllib.request.build_opener(*handlers)


def http_json(method: str, path: str, body: Optional[Any] = None,
              timeout: float = HTTP_TIMEOUT_S) -> Tuple[int, Any]:
    """One request to the agent; (status, parsed JSON body). Raises AgentUnavailable when nothing
    answers (refused, unreachable, timed out) or the answer is not JSON."""
    url = agent_url() + path
    data = None
    headers = _headers()
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    check_token_transport(url, os.environ.get("GPUFLEET_TOKEN"))
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with _opener(url, "Authorization" in headers).open(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:  # an answer, with an error status
        status, raw = e.code, e.read()
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise AgentUnavailable(f"no gpufleet agent answers at {agent_url()} ({reason})") from e
    try:
        return status, json.loads(raw.decode() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AgentUnavailable(f"{url} did not answer with JSON (is it a gpufleet agent?)") from e


def error_text(doc: Any) -> str:
    """The message of an agent error document, whatever its shape."""
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err.get("kind") or err)
        if doc.get("message"):
            return str(doc["message"])
        if err:
            return str(err)
    return json.dumps(doc)


def binary() -> Optional[str]:
    """The gpufleet binary: $GPUFLEET_BIN, else the one on PATH; None when there is none."""
    b = os.environ.get("GPUFLEET_BIN")
    if b:
        return b if os.access(b, os.X_OK) else None
    return shutil.which("gpufleet")


def run_binary(args: List[str], ok_codes: Tuple[int, ...] = (0,), timeout: float = 60.0,
               parse: bool = True) -> Tuple[int, Any, str]:
    """Runs `gpufleet ARGS`; (exit code, stdout parsed as JSON when PARSE, else None, stderr).
    Raises AgentUnavailable when there is no binary to run, GpufleetError when it exits with a status
    not in ok_codes (its first stderr line says why)."""
    b = binary()
    if b is None:
        raise AgentUnavailable(
            f"no gpufleet agent answers at {agent_url()} and no gpufleet binary was found "
            "(set GPUFLEET_URL, or GPUFLEET_BIN, or put gpufleet on PATH)")
    try:
        p = subprocess.run([b, *args], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise AgentUnavailable(f"running {b} {' '.join(args)} failed: {e}") from e
    if p.returncode not in ok_codes:
        msg = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[0]
        raise GpufleetError(f"{b} {' '.join(args)}: {msg}")
    doc = None
    if parse and p.stdout.strip():
        try:
            doc = json.loads(p.stdout)
        except json.JSONDecodeError as e:
            raise GpufleetError(f"{b} {' '.join(args)} printed no JSON") from e
    return p.returncode, doc, p.stderr


def socket_path() -> Optional[str]:
    """The agent socket the CLI would use (docs/agent-socket.md): $GPUFLEET_SOCKET ('none': no
    socket), else the root agent's, else this user's own agent's, else None."""
    env = os.environ.get("GPUFLEET_SOCKET")
    if env:
        return None if env == "none" else env
    candidates = ["/run/gpufleet/agent.sock"]
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        candidates.append(os.path.join(xdg, "gpufleet", "agent.sock"))
    candidates.append(f"/tmp/gpufleet-{os.getuid()}/agent.sock")
    for c in candidates:
        # Our own agent's directory must be ours: another user may have made /tmp/gpufleet-<uid>.
        if os.path.exists(c) and (c.startswith("/run/") or _owned_by_us(os.path.dirname(c))):
            return c
    return None


def _owned_by_us(directory: str) -> bool:
    try:
        return os.stat(directory).st_uid == os.getuid()
    except OSError:
        return False


def _check_peer(sock: socket.socket, path: str) -> None:
    """Only root's agent or our own is believed (as the CLI's AgentClient::connect): a socket another
    user planted where ours would be must not hear our requests or answer them."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    if uid != 0 and uid != os.geteuid():
        raise AgentUnavailable(
            f"the socket {path} is served by uid {uid}, neither root nor you: not talking to it")


class AgentSocket:
    """One connection to the agent socket. The agent learns who we are from SO_PEERCRED, so what it
    grants belongs to this process's user; leases tied to the connection end when it closes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._next_id = 1
        self._buf = b""
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(SOCKET_CONNECT_TIMEOUT_S)
        try:
            self._sock.connect(path)
            _check_peer(self._sock, path)
            self.greeting: Dict[str, Any] = self._read_line()
        except AgentUnavailable:
            self._sock.close()
            raise
        except (OSError, ValueError) as e:
            self._sock.close()
            raise AgentUnavailable(f"the agent socket {path} does not answer ({e})") from e
        if self.greeting.get("hello") != "gpufleet-agent":
            self._sock.close()
            raise AgentUnavailable(f"{path} is not a gpufleet agent socket")
        self._sock.settimeout(SOCKET_SILENCE_S)

    def _read_line(self) -> Dict[str, Any]:
        while b"\n" not in self._buf:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("the agent closed the connection")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        doc = json.loads(line)
        if not isinstance(doc, dict):
            raise ValueError("the agent sent a line that is not a JSON object")
        return doc

    def request(self, op: str, **args: Any) -> Dict[str, Any]:
        """Sends one request and returns its reply ({"ok": ...}); progress and lease events that
        arrive meanwhile are skipped."""
        rid = self._next_id
        self._next_id += 1
        line = json.dumps({"id": rid, "op": op, **args}) + "\n"
        try:
            self._sock.sendall(line.encode())
            while True:
                doc = self._read_line()
                if doc.get("id") == rid and "ok" in doc:
                    return doc
                if doc.get("id") is None and doc.get("ok") is False:
                    raise GpufleetError(f"the agent refused the request: {error_text(doc)}")
        except socket.timeout as e:
            raise AgentUnavailable(f"the agent at {self.path} is not answering") from e
        except (OSError, ValueError) as e:
            raise AgentUnavailable(f"the agent socket {self.path} failed: {e}") from e

    def close(self) -> None:
        self._sock.close()


def query(path: str, params: Optional[Dict[str, Any]] = None) -> str:
    """PATH with its query string."""
    if not params:
        return path
    return path + "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
