"""Raw HTTP/1.1 over loopback sockets, for the tests of the web port's edge: framings, deadlines and refusals that an
HTTP client library would not let a test send (a chunked body it gives up on, headers one line at a time)."""

import json
import select
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass
class Answer:
    status: int | None  # None: the server closed the connection without answering
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


def connect(web_url: str) -> socket.socket:
    address = urlsplit(web_url)
    return socket.create_connection((address.hostname, address.port), timeout=30)


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"


def read_answer(sock: socket.socket, timeout: float = 30) -> Answer:
    """One response, read until its Content-Length is complete or the server closes."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            received = sock.recv(65536)
        except ConnectionResetError:
            received = b""
        data += received
        head, separator, body = data.partition(b"\r\n\r\n")
        if separator:
            lines = head.decode("latin1").split("\r\n")
            headers: dict[str, str] = {}
            for name, _, value in (line.partition(":") for line in lines[1:]):
                # Repeated headers (Set-Cookie) kept one a line.
                headers[name.strip().lower()] = "\n".join(
                    filter(None, [headers.get(name.strip().lower()), value.strip()])
                )
            if len(body) >= int(headers.get("content-length", "0")):
                return Answer(int(lines[0].split()[1]), headers, body)
        if not received:
            return Answer(None, {}, b"")


def answered_while_sending(sock: socket.socket, pieces) -> tuple[Answer, int]:
    """Sends `pieces` until the server answers (or all are sent); the answer and the bytes sent before it."""
    sent = 0
    for piece in pieces:
        readable, _, _ = select.select([sock], [], [], 0)
        if readable:
            break
        try:
            sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += len(piece)
    return read_answer(sock), sent


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed (or answered and closed) this connection, without waiting."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        sock.setblocking(False)
        while received := sock.recv(65536):
            del received
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        sock.setblocking(True)
    return True
