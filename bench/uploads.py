"""Uploads on each store: `python -m bench --uploads [--quick]` (docs/design.md §12).

For the local store and an S3-speaking store (moto's standalone server, started as a process like the tests'), the
time a client takes to prepare, PUT and complete one 10 MiB photo, alone and ten at once, beside the floor of the
same bytes on the same store without Impo:
- local: hashing the bytes and writing them to a file in the store's directory, in this process;
- S3: one `put_object` of the bytes through boto3, which is what any client of that store pays.
The web process's peak RSS (its whole process tree, sampled) while the ten are in flight is printed beside its RSS
at rest: the local store's PUT streams the body to disk, so ten at once must not hold ten bodies in memory.

Then what a photo costs a turn: POST of a message → its reply's first `text-delta` on the submission's stream, with
one 2048-px photo attached against the same message with none (a worker host and the double, on the local store).
"""

import hashlib
import io
import os
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import httpx
from PIL import Image

from bench.harness import Figure, create_users, median_and_p95
from bench.inflight_load import rss_mb
from devtools.stack import VENV_BIN, ServiceProcess, Stack, free_port, start_web, wait_until

MIB = 1024 * 1024
BUCKET = "impo-bench-attachments"
S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "moto", "AWS_SECRET_ACCESS_KEY": "moto", "AWS_DEFAULT_REGION": "us-east-1"}
RSS_SAMPLE_SECONDS = 0.05


def photo(target_bytes: int = 10 * MIB - 64 * 1024) -> bytes:
    """A PNG of noise just under `target_bytes`: it does not compress, so its size is its pixels' (3 bytes each)."""
    side = int((target_bytes / 3) ** 0.5)
    while True:
        out = io.BytesIO()
        Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, format="PNG", compress_level=1)
        if out.tell() <= target_bytes:
            return out.getvalue()
        side -= 8


def _manifest(data: bytes, name: str, media_type: str) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "name": name,
        "mediaType": media_type,
        "sizeBytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def put(base_url: str, token: str, data: bytes, name: str = "photo.png", media_type: str = "image/png") -> str:
    """prepare → PUT, as a client does; the file's id."""
    sent = _manifest(data, name, media_type)
    with _api(base_url, token) as api:
        ticket = api.post("/api/v1/attachments/prepare", json=sent).raise_for_status().json()["upload"]
    httpx.put(ticket["url"], content=data, headers=ticket["headers"], timeout=120).raise_for_status()
    return sent["id"]


def complete(base_url: str, token: str, file_id: str) -> None:
    with _api(base_url, token) as api:
        api.post(f"/api/v1/attachments/{file_id}/complete", json={}).raise_for_status()


def upload(base_url: str, token: str, data: bytes) -> float:
    """prepare → PUT → complete; the seconds it took."""
    started = time.perf_counter()
    complete(base_url, token, put(base_url, token, data))
    return time.perf_counter() - started


def _api(base_url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=120)


class PeakRss:
    """The peak RSS of a process tree while the block runs, sampled from /proc."""

    def __init__(self, root_pid: int):
        self.root_pid = root_pid
        self.at_rest = rss_mb(root_pid)
        self.peak = self.at_rest
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self._sampler.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._sampler.join()

    def _sample(self):
        while not self._stop.wait(RSS_SAMPLE_SECONDS):
            self.peak = max(self.peak, rss_mb(self.root_pid))


def _local_floor(data: bytes, directory: str) -> float:
    started = time.perf_counter()
    hashlib.sha256(data).hexdigest()
    with tempfile.NamedTemporaryFile(dir=directory, delete=True) as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    return time.perf_counter() - started


def _s3_floor(endpoint: str) -> "callable":
    client = boto3.client("s3", endpoint_url=endpoint)

    def put(data: bytes) -> float:
        started = time.perf_counter()
        client.put_object(Bucket=BUCKET, Key=f"floor/{uuid.uuid4()}", Body=data, ContentType="image/png")
        return time.perf_counter() - started

    return put


def start_s3_server() -> tuple[ServiceProcess, str]:
    port = free_port()
    server = ServiceProcess("moto", [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)])
    endpoint = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        if not server.alive:
            raise RuntimeError(f"moto exited: {server.log_text()[-2000:]}")
        try:
            return httpx.get(f"{endpoint}/moto-api/", timeout=1).status_code < 500
        except httpx.TransportError:
            return False

    wait_until(serving, timeout=60, what="moto's S3 server")
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    return server, endpoint


def _store_env(store: str, directory: str, endpoint: str) -> dict:
    if store == "local":
        return {"IMPO_ATTACHMENT_STORE": "local", "IMPO_ATTACHMENT_DIR": directory}
    return {
        "IMPO_ATTACHMENT_STORE": "s3",
        "IMPO_ATTACHMENT_S3_BUCKET": BUCKET,
        "IMPO_ATTACHMENT_S3_ENDPOINT": endpoint,
        "IMPO_ATTACHMENT_S3_REGION": "us-east-1",
        **S3_CREDENTIALS,
    }


def measure(stack: Stack, *, rounds: int) -> list[Figure]:
    """Each store: one upload at a time (`rounds` of them), then ten at once; each beside the store's floor."""
    os.environ.update(S3_CREDENTIALS)  # this process's boto3 (the S3 floor) reads the same credentials
    data = photo()
    figures = []
    s3_server, endpoint = start_s3_server()
    try:
        with tempfile.TemporaryDirectory(prefix="impo-bench-uploads-") as directory:
            floors = {"local": lambda body: _local_floor(body, directory), "s3": _s3_floor(endpoint)}
            for store in ("local", "s3"):
                env = _store_env(store, directory, endpoint)
                figures += _measure_store(stack, store, data, env, floors[store], rounds)
    finally:
        s3_server.stop()
    return figures


def photo_2048() -> bytes:
    """A 2048 × 1536 camera-like JPEG: noise, so it compresses as little as a photo does."""
    out = io.BytesIO()
    Image.frombytes("RGB", (2048, 1536), os.urandom(2048 * 1536 * 3)).save(out, format="JPEG", quality=90)
    return out.getvalue()


def first_delta(base_url: str, token: str, attachment_ids: list[str]) -> float:
    """Seconds from the message's POST to its reply's first text-delta chunk on the submission's stream."""
    body = {"clientMessageId": str(uuid.uuid4()), "text": "what is in this?", "attachmentIds": attachment_ids}
    started = time.perf_counter()
    with _api(base_url, token) as api:
        submission = api.post("/api/v1/conversation/messages", json=body).raise_for_status().json()["submissionId"]
        with api.stream("GET", f"/api/v1/submissions/{submission}/stream") as stream:
            seen = []
            for line in stream.iter_lines():
                if line.startswith("data:") and '"text-delta"' in line:
                    return time.perf_counter() - started
                seen.append(line)
    raise RuntimeError(f"the stream of {submission} ended without a text-delta: {seen[-14:]}")


def measure_first_delta(stack: Stack, *, rounds: int) -> Figure:
    with tempfile.TemporaryDirectory(prefix="impo-bench-uploads-") as directory:
        env = _store_env("local", directory, "")
        web, base_url = start_web(stack, name="web-first-delta", env=env)
        host = stack.start_worker(env=env)
        try:
            (_, token), *_ = create_users(1, f"first-delta-{uuid.uuid4().hex[:6]}")
            image = photo_2048()
            first_delta(base_url, token, [])  # warms the agent, the session and the processes' imports
            without = [first_delta(base_url, token, []) for _ in range(rounds)]
            with_image = []
            for _ in range(rounds):
                file_id = put(base_url, token, image, "photo.jpg", "image/jpeg")
                complete(base_url, token, file_id)
                with_image.append(first_delta(base_url, token, [file_id]))
        finally:
            host.stop()
            web.stop()
    with_p50, _ = median_and_p95(with_image)
    without_p50, _ = median_and_p95(without)
    return Figure(
        f"POST → first delta with one 2048-px photo ({len(image) / MIB:.1f} MiB JPEG), median of {rounds}",
        with_p50,
        "s",
        "the same message without it",
        without_p50,
        higher_is_better=False,
    )


def _measure_store(stack: Stack, store: str, data: bytes, env: dict, floor, rounds: int) -> list[Figure]:
    web, base_url = start_web(stack, name=f"web-uploads-{store}", env=env)
    try:
        (_, token), *_ = create_users(1, f"uploads-{store}-{uuid.uuid4().hex[:6]}")
        upload(base_url, token, data)  # the first request warms the process's imports; not counted
        alone = [upload(base_url, token, data) for _ in range(rounds)]
        floor_alone = [floor(data) for _ in range(rounds)]
        with ThreadPoolExecutor(10) as pool:
            started = time.perf_counter()
            with PeakRss(web.process.pid) as putting:
                ids = list(pool.map(lambda _: put(base_url, token, data), range(10)))
            with PeakRss(web.process.pid) as completing:
                list(pool.map(lambda file_id: complete(base_url, token, file_id), ids))
            together_wall = time.perf_counter() - started
        with ThreadPoolExecutor(10) as pool:
            started = time.perf_counter()
            list(pool.map(lambda _: floor(data), range(10)))
            floor_together_wall = time.perf_counter() - started
    finally:
        web.stop()
    size = f"{len(data) / MIB:.1f} MiB"
    floor_name = "hash + write + fsync" if store == "local" else "boto3 put_object"
    alone_p50, _ = median_and_p95(alone)
    floor_p50, _ = median_and_p95(floor_alone)
    return [
        Figure(
            f"{store} store: prepare + PUT + complete of one {size} photo, median of {rounds}",
            alone_p50,
            "s",
            f"the same bytes straight to the store ({floor_name})",
            floor_p50,
            higher_is_better=False,
        ),
        Figure(
            f"{store} store: ten {size} photos at once (prepare + PUT, then complete), until the last completes",
            together_wall,
            "s",
            "ten at once straight to the store",
            floor_together_wall,
            higher_is_better=False,
        ),
        Figure(
            f"{store} store: the web process's peak RSS while ten PUT at once",
            putting.peak,
            "MB",
            "its RSS at rest",
            putting.at_rest,
            higher_is_better=False,
        ),
        Figure(
            f"{store} store: the web process's peak RSS while ten complete at once",
            completing.peak,
            "MB",
            "its RSS at rest",
            putting.at_rest,
            higher_is_better=False,
        ),
    ]
