"""A push service for tests and benches: RFC 8030 over HTTP on a loopback port, with browsers' subscriptions of its own.

Written from the RFCs, independently of the sender's libraries: it checks each push's VAPID token (RFC 8292) against
the server's public key it was given, decrypts each message (RFC 8291 over RFC 8188 `aes128gcm`) with the private
key and auth secret of the subscription it made as a browser does, and keeps what it accepted, a repeat with the
same `Topic` replacing one not yet read (RFC 8030 §5.4). It answers what the test scripts: 201, a status (429 with
`Retry-After`, 5xx, 404, 410), or a hang that never answers.
"""

import base64
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

HANG = "hang"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_vapid_private_key() -> str:
    """What `make run` keeps in var/vapid_private_key: base64url of a raw P-256 private key."""
    return b64url(ec.generate_private_key(ec.SECP256R1()).private_numbers().private_value.to_bytes(32, "big"))


def vapid_public_key_of(private_key: str) -> str:
    key = ec.derive_private_key(int.from_bytes(unb64url(private_key), "big"), ec.SECP256R1())
    return b64url(
        key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )


@dataclass
class Browser:
    """A browser's side of one subscription: its ECDH key pair and auth secret (RFC 8291 §2), and the endpoint."""

    endpoint: str
    token: str
    private_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    auth_secret: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def public_key(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )

    def to_json(self) -> dict:
        """`PushSubscription.toJSON()`."""
        return {
            "endpoint": self.endpoint,
            "expirationTime": None,
            "keys": {"p256dh": b64url(self.public_key), "auth": b64url(self.auth_secret)},
        }

    def decrypt(self, body: bytes) -> bytes:
        """RFC 8188 §2 framing, RFC 8291 §3.4 keys; one record, as RFC 8291 §4 requires."""
        salt, record_size, id_length = body[:16], int.from_bytes(body[16:20], "big"), body[20]
        sender_public = body[21 : 21 + id_length]
        ciphertext = body[21 + id_length :]
        assert id_length == 65 and len(ciphertext) <= record_size
        sender = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), sender_public)
        shared = self.private_key.exchange(ec.ECDH(), sender)
        key_info = b"WebPush: info\x00" + self.public_key + sender_public
        ikm = _hkdf(salt=self.auth_secret, ikm=shared, info=key_info, length=32)
        content_key = _hkdf(salt=salt, ikm=ikm, info=b"Content-Encoding: aes128gcm\x00", length=16)
        nonce = _hkdf(salt=salt, ikm=ikm, info=b"Content-Encoding: nonce\x00", length=12)
        padded = AESGCM(content_key).decrypt(nonce, ciphertext, None)
        unpadded = padded.rstrip(b"\x00")
        assert unpadded.endswith(b"\x02"), "the last record ends with the delimiter 2"
        return unpadded[:-1]


def _hkdf(*, salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


@dataclass(frozen=True)
class Accepted:
    token: str
    topic: str | None
    urgency: str | None
    ttl: int
    payload: dict
    at: float


class PushService:
    def __init__(self, port: int, vapid_public_key: str):
        self.port = port
        self.origin = f"http://127.0.0.1:{port}"
        self.vapid_public_key = vapid_public_key
        self.browsers: dict[str, Browser] = {}
        self.script: list = []  # what to answer to the next pushes, in order; then 201
        self.script_for: dict[str, list] = {}  # the same for one browser's pushes, answered before `script`
        self.accepted: list[Accepted] = []
        self.refused: list[str] = []  # why each refused push was refused (a broken token, an unreadable body)
        self.attempts = 0
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    # --- the test's controls ---

    def subscribe(self) -> Browser:
        token = uuid.uuid4().hex
        browser = Browser(endpoint=f"{self.origin}/push/{token}", token=token)
        self.browsers[token] = browser
        return browser

    def answer(self, *responses) -> None:
        """Each an HTTP status, (status, Retry-After seconds), or HANG, for the next pushes in order."""
        with self._lock:
            self.script.extend(responses)

    def answer_for(self, browser: Browser, *responses) -> None:
        """As `answer`, for the next pushes to this browser only."""
        with self._lock:
            self.script_for.setdefault(browser.token, []).extend(responses)

    def notifications(self, browser: Browser | None = None) -> list[dict]:
        """The messages a browser would show: what was accepted, a later one with a topic replacing the earlier."""
        kept: dict = {}
        with self._lock:
            for each in self.accepted:
                if browser is None or each.token == browser.token:
                    kept[(each.token, each.topic or id(each))] = each.payload
        return list(kept.values())

    def accepted_for(self, browser: Browser) -> list[Accepted]:
        with self._lock:
            return [each for each in self.accepted if each.token == browser.token]

    # --- the server ---

    def start(self) -> "PushService":
        service = self
        self._release.clear()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle(self):
                # A sender keeps its connection open between pushes and may drop it at any time (it stopped, or
                # gave up on an answer): a push service takes that as the connection's end, not as an error.
                try:
                    super().handle()
                except ConnectionError:
                    self.close_connection = True

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with service._lock:
                    service.attempts += 1
                    own = service.script_for.get(self.path.rsplit("/", 1)[-1])
                    response = own.pop(0) if own else service.script.pop(0) if service.script else 201
                if response == HANG:
                    service._release.wait(300)
                    self.close_connection = True
                    return
                status, retry_after = response if isinstance(response, tuple) else (response, None)
                if status == 201:
                    status = service._accept(self.path, dict(self.headers.items()), body)
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _accept(self, path: str, headers: dict, body: bytes) -> int:
        token = path.rsplit("/", 1)[-1]
        browser = self.browsers.get(token)
        if browser is None:
            return 404
        problem = self._vapid_problem(headers.get("Authorization", ""))
        if problem is None and headers.get("Content-Encoding") != "aes128gcm":
            problem = "not aes128gcm"
        if problem is None and len(body) > 4096:
            return 413
        if problem is not None:
            with self._lock:
                self.refused.append(problem)
            return 403 if "vapid" in problem else 400
        try:
            payload = json.loads(browser.decrypt(body))
        except Exception as exc:  # noqa: BLE001 - any failure to decrypt is the sender's fault, recorded
            with self._lock:
                self.refused.append(f"cannot decrypt: {exc!r}")
            return 400
        with self._lock:
            self.accepted.append(
                Accepted(
                    token=token,
                    topic=headers.get("Topic"),
                    urgency=headers.get("Urgency"),
                    ttl=int(headers.get("TTL", "-1")),
                    payload=payload,
                    at=time.time(),
                )
            )
        return 201

    def _vapid_problem(self, authorization: str) -> str | None:
        """RFC 8292 §3: `vapid t=<JWT>, k=<public key>`; the key must be the server's, the token signed by it (ES256),
        for this origin, unexpired and for at most 24 hours."""
        scheme, _, parameters = authorization.partition(" ")
        if scheme.lower() != "vapid":
            return "vapid: no vapid authorization"
        values = dict(part.strip().split("=", 1) for part in parameters.split(",") if "=" in part)
        if values.get("k") != self.vapid_public_key:
            return "vapid: not the server's key"
        try:
            header_part, claims_part, signature_part = values["t"].split(".")
            header = json.loads(unb64url(header_part))
            claims = json.loads(unb64url(claims_part))
            signature = unb64url(signature_part)
            key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(self.vapid_public_key))
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            key.verify(der, f"{header_part}.{claims_part}".encode("ascii"), ec.ECDSA(hashes.SHA256()))
        except (KeyError, ValueError, InvalidSignature):
            return "vapid: the token does not verify"
        if header.get("alg") != "ES256" or len(signature) != 64:
            return "vapid: not ES256"
        if claims.get("aud") != self.origin:
            return "vapid: wrong audience"
        if not time.time() < claims.get("exp", 0) <= time.time() + 24 * 3600:
            return "vapid: expired or too long"
        if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
            return "vapid: no subject"
        return None
