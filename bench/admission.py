"""Admission: accepted POSTs per second through daphne, against pgbench single-row inserts on the same database.

An admission is one transaction (message, submission, run, event, conversation sequence) plus a Celery
wake-up on commit, behind HTTP, token auth and validation; pgbench's single-row INSERT is the ceiling the
database itself sets for one-transaction-per-request work at the same client concurrency.
"""

import asyncio
import re
import subprocess
import tempfile
import time
import uuid

import httpx

from bench.harness import PGHOST, PGUSER, Figure

CLIENT_CONCURRENCY = 8


def pgbench_insert_tps(database: str, seconds: int) -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_baseline_rows (id bigserial PRIMARY KEY, payload text)")
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
        script.write("INSERT INTO bench_baseline_rows (payload) VALUES ('one accepted message');\n")
        script.flush()
        result = subprocess.run(
            ["pgbench", "-h", PGHOST, "-U", PGUSER, "-n", "-c", str(CLIENT_CONCURRENCY), "-j", "2"]
            + ["-T", str(seconds), "-f", script.name, database],
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        raise RuntimeError(f"pgbench failed: {result.stderr[-2000:]}")
    return float(re.search(r"tps = ([0-9.]+)", result.stdout).group(1))


async def _post_messages(web_url: str, tokens: list[str], count: int) -> tuple[float, list[str]]:
    """Seconds taken to get `count` messages accepted, round-robin over the tokens' conversations."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(count):
        queue.put_nowait(index)
    refused: list[str] = []

    async def client_loop(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            index = queue.get_nowait()
            response = await client.post(
                "/api/v1/conversation/messages",
                json={"clientMessageId": str(uuid.uuid4()), "text": f"message {index}"},
                headers={"Authorization": f"Bearer {tokens[index % len(tokens)]}"},
            )
            if response.status_code != 202:
                refused.append(f"{response.status_code} {response.text[:200]}")

    limits = httpx.Limits(max_connections=CLIENT_CONCURRENCY)
    async with httpx.AsyncClient(base_url=web_url, limits=limits, timeout=30) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(client) for _ in range(CLIENT_CONCURRENCY)))
        return time.perf_counter() - started, refused


def admission_rate(web_url: str, tokens: list[str], count: int) -> tuple[float, list[str]]:
    """Accepted messages per second, and what any refused request answered."""
    # Warm the server's connections and code paths first; they are not what is being measured.
    asyncio.run(_post_messages(web_url, tokens, min(50, count)))
    seconds, refused = asyncio.run(_post_messages(web_url, tokens, count))
    return (count - len(refused)) / seconds, refused


def measure(web_url: str, tokens: list[str], database: str, *, count: int, seconds: int) -> Figure:
    rate, refused = admission_rate(web_url, tokens, count)
    baseline = pgbench_insert_tps(database, seconds)
    notes = [f"{len(refused)} of {count} refused, first: {refused[0]}"] if refused else [f"all {count} accepted"]
    return Figure(
        f"admission, {len(tokens)} conversations",
        rate,
        "req/s",
        baseline_name=f"pgbench single-row INSERT, {CLIENT_CONCURRENCY} clients",
        baseline=baseline,
        notes=notes,
    )
