"""A small blocking websocket client (RFC 6455, text frames) for talking to the web server over loopback.

The chaos runner needs many concurrent sockets it can cut abruptly (no close handshake), which is
simplest with a plain socket per connection and a reader thread; nothing here is clever.
"""

import base64
import contextlib
import json
import os
import socket
import struct
from urllib.parse import urlsplit

OPCODE_CONTINUATION, OPCODE_TEXT, OPCODE_CLOSE, OPCODE_PING, OPCODE_PONG = 0x0, 0x1, 0x8, 0x9, 0xA


class Refused(Exception):
    """The server closed or rejected the socket during or right after the handshake."""


class Closed(Exception):
    """The connection ended (a close frame or EOF)."""


class WebsocketConnection:
    def __init__(self, url: str, *, timeout: float = 10.0):
        parts = urlsplit(url)
        self._sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        self._buffer = b""
        key = base64.b64encode(os.urandom(16)).decode()
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        host = f"{parts.hostname}:{parts.port}"
        self._sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://{host}\r\n\r\n"
            ).encode()
        )
        head = self._read_until(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            self.abort()
            raise Refused(head.split(b"\r\n", 1)[0].decode(errors="replace"))

    def receive_json(self, timeout: float) -> dict:
        """The next text message as JSON; raises TimeoutError, or Closed when the server ended it.

        A frame is consumed only once it is complete, so a timeout never loses part of one.
        """
        self._sock.settimeout(timeout)
        message = b""
        while True:
            final, opcode, data = self._next_frame()
            if opcode == OPCODE_CLOSE:
                raise Closed(data[2:].decode(errors="replace"))
            if opcode == OPCODE_PING:
                self._send_frame(OPCODE_PONG, data)
                continue
            if opcode in (OPCODE_TEXT, OPCODE_CONTINUATION):
                message += data
                if final:
                    return json.loads(message)

    def _next_frame(self) -> tuple[bool, int, bytes]:
        while True:
            frame = self._parse_frame()
            if frame is not None:
                return frame
            self._fill()

    def _parse_frame(self) -> tuple[bool, int, bytes] | None:
        buffer = self._buffer
        if len(buffer) < 2:
            return None
        first, length, offset = buffer[0], buffer[1] & 0x7F, 2
        if length == 126:
            if len(buffer) < 4:
                return None
            (length,) = struct.unpack("!H", buffer[2:4])
            offset = 4
        elif length == 127:
            if len(buffer) < 10:
                return None
            (length,) = struct.unpack("!Q", buffer[2:10])
            offset = 10
        if len(buffer) < offset + length:
            return None
        self._buffer = buffer[offset + length :]
        return bool(first & 0x80), first & 0x0F, buffer[offset : offset + length]

    def send_json(self, value) -> None:
        self._send_frame(OPCODE_TEXT, json.dumps(value).encode())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._send_frame(OPCODE_CLOSE, struct.pack("!H", 1000))
        self.abort()

    def abort(self) -> None:
        """Drops the TCP connection without a close handshake, like a phone losing its network."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        header = bytes([0x80 | opcode])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", len(payload))
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
        self._sock.sendall(header + mask + masked)

    def _read_until(self, marker: bytes) -> bytes:
        while marker not in self._buffer:
            self._fill()
        head, self._buffer = self._buffer.split(marker, 1)
        return head

    def _fill(self) -> None:
        try:
            chunk = self._sock.recv(65536)
        except TimeoutError:
            raise
        except OSError as exc:
            raise Closed(str(exc)) from exc
        if not chunk:
            raise Closed("EOF")
        self._buffer += chunk
