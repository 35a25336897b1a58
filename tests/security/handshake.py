"""Raw websocket handshakes with the headers a browser (or an attacker's page) would send."""

import base64
import json
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from django.contrib.auth.hashers import make_password

from tests.factories import PASSWORD


@dataclass
class Handshake:
    status_line: str
    sock: socket.socket
    received: bytes  # what arrived after the response head

    def close(self) -> None:
        self.sock.close()


def open_socket(url: str, headers: dict[str, str]) -> Handshake:
    """Sends the upgrade request; returns the response's status line and the open connection."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    lines = [
        f"GET {parts.path}?{parts.query} HTTP/1.1",
        f"Host: {parts.hostname}:{parts.port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
        "Sec-WebSocket-Version: 13",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = sock.recv(4096)
        if not chunk:
            break
        response += chunk
    head, _, rest = response.partition(b"\r\n\r\n")
    return Handshake(head.split(b"\r\n", 1)[0].decode(errors="replace"), sock, rest)


def first_message(handshake: Handshake) -> dict:
    """The first text frame the server sends (server frames are unmasked)."""
    sock, buffer = handshake.sock, handshake.received

    def need(count: int) -> None:
        nonlocal buffer
        while len(buffer) < count:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the socket")
            buffer += chunk

    need(2)
    length, offset = buffer[1] & 0x7F, 2
    if length == 126:
        need(4)
        length, offset = int.from_bytes(buffer[2:4], "big"), 4
    need(offset + length)
    return json.loads(buffer[offset : offset + length])


def session_cookie(base_url: str, user) -> str:
    """Logs `user` in through the web login form, as a browser would; returns its Cookie header."""
    user.password = make_password(PASSWORD, hasher="pbkdf2_sha256")  # what the server's settings verify
    user.save()
    with httpx.Client(base_url=base_url, timeout=60) as client:  # a loaded machine's shared web server is slow
        client.get("/login/")
        response = client.post(
            "/login/",
            data={"username": user.username, "password": PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"]},
            headers={"Referer": f"{base_url}/login/"},
        )
        assert response.status_code == 302, response.text
        return f"sessionid={client.cookies['sessionid']}"
