"""Many open conversation websockets: opened concurrently, held idle, counted; what holding them costs the server.

The sockets live in one asyncio loop on a thread of the benchmark process (the `websockets` client), so thousands
cost the client little. A socket that does not complete its handshake within the connect timeout counts as a
connect timeout, the failure seen when a web process's loop or database thread is saturated.
"""

import asyncio
import contextlib
import os
import resource
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from websockets.asyncio.client import connect

from bench.harness import Figure

CONNECT_TIMEOUT_SECONDS = 10.0
CONNECTS_IN_FLIGHT = 50
# Sockets, each with a few descriptors on both ends, all on this machine.
DESCRIPTORS_NEEDED = 16384


def raise_descriptor_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = DESCRIPTORS_NEEDED if hard == resource.RLIM_INFINITY else min(DESCRIPTORS_NEEDED, hard)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


@dataclass
class IdleSockets:
    """Open websockets to `urls`, held until closed; what happened to each is counted."""

    urls: list[str]
    connect_timeouts: int = 0
    refused: list[str] = field(default_factory=list)
    closed_by_server: int = 0
    connect_seconds: float = 0.0
    _closing: bool = False
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _connections: list = field(default_factory=list)

    def __post_init__(self):
        self._thread = threading.Thread(target=self._loop.run_forever, name="idle-sockets", daemon=True)
        self._thread.start()

    def open(self) -> "IdleSockets":
        started = time.monotonic()
        asyncio.run_coroutine_threadsafe(self._open_all(), self._loop).result()
        self.connect_seconds = time.monotonic() - started
        return self

    @property
    def open_count(self) -> int:
        return sum(1 for connection in self._connections if connection.close_code is None)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close_all(), self._loop).result(timeout=120)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _open_all(self) -> None:
        gate = asyncio.Semaphore(CONNECTS_IN_FLIGHT)

        async def open_one(url: str) -> None:
            async with gate:
                try:
                    connection = await connect(url, open_timeout=CONNECT_TIMEOUT_SECONDS, max_queue=None)
                except TimeoutError:
                    self.connect_timeouts += 1
                    return
                except OSError as exc:
                    self.refused.append(repr(exc))
                    return
                except Exception as exc:  # a handshake the server refused (403, 5xx): reported, not hidden
                    self.refused.append(repr(exc))
                    return
                self._connections.append(connection)
                self._loop.create_task(self._drain(connection))

        await asyncio.gather(*(open_one(url) for url in self.urls))

    async def _drain(self, connection) -> None:
        # Replays and pushes are read and dropped; a close from the server is what is counted.
        with contextlib.suppress(Exception):
            async for _ in connection:
                pass
        if not self._closing:
            self.closed_by_server += 1

    async def _close_all(self) -> None:
        self._closing = True
        await asyncio.gather(*(connection.close() for connection in self._connections), return_exceptions=True)


def _children_of(pid: int) -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                children.append(int(stat.parent.name))
    return children


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def web_process_ids(masters: list[int]) -> list[int]:
    """The uvicorn worker processes of the given gunicorn masters."""
    return [child for master in masters for child in _children_of(master)]


def measure_idle(urls: list[str], web_pids: list[int], *, hold_seconds: float, interval_seconds: float) -> Figure:
    """Opens one socket per URL, holds them idle for `hold_seconds`, and reports timeouts, closes and server CPU."""
    sockets = IdleSockets(urls)
    try:
        sockets.open()
        before = cpu_seconds(web_pids)
        started = time.monotonic()
        time.sleep(hold_seconds)  # the measured window itself: idle sockets, nothing to wait for
        held = time.monotonic() - started
        cpu = cpu_seconds(web_pids) - before
        still_open = sockets.open_count
    finally:
        sockets.close()
    return Figure(
        f"{len(urls)} idle sockets on {len(web_pids)} web processes: connect timeouts",
        sockets.connect_timeouts,
        "sockets",
        notes=[
            f"opened in {sockets.connect_seconds:.1f} s ({CONNECTS_IN_FLIGHT} handshakes in flight, "
            f"{CONNECT_TIMEOUT_SECONDS:.0f} s timeout); refused {len(sockets.refused)}"
            + (f" (first: {sockets.refused[0]})" if sockets.refused else ""),
            f"held {held:.0f} s ({held / interval_seconds:.0f} catch-up intervals): {still_open} still open, "
            f"{sockets.closed_by_server} closed by the server",
            f"web CPU while idle: {cpu / held * 1000:.1f} ms per second for all sockets "
            f"({cpu / held * interval_seconds * 1000 / max(1, len(web_pids)):.1f} ms per process per interval)",
        ],
    )
