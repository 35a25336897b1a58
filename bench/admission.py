"""Admission: accepted POSTs per second and CPU per admission, against the database's own ceiling for the same work.

Three measurements of one admission, in the same run and database:
- the real endpoint (`POST /api/v1/conversation/messages`: token, validation, rate and cap, the admission statement,
  wake-up and live push after commit), served by gunicorn with two uvicorn worker processes;
- a bare Django view running the same admission statement under the same server (bench/admission_asgi.py);
- pgbench running that same statement, one transaction each, with the same client concurrency: the ceiling.
CPU per admission is the server processes' user + system time (from /proc) over the measured requests.
"""

import asyncio
import json
import os
import re
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from bench.harness import PGHOST, PGPORT, PGUSER, Figure
from devtools.stack import VENV_BIN, ServiceProcess, free_port, port_open, wait_until

CLIENT_CONCURRENCY = 8
WEB_PROCESSES = 2
WARM_UP_REQUESTS = 50
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the server under test -------------------------------------------------------------------------------


def start_server(stack, application: str) -> tuple[ServiceProcess, int]:
    port = free_port()
    server = ServiceProcess(
        "gunicorn",
        [str(VENV_BIN / "gunicorn"), "-k", "uvicorn.workers.UvicornWorker", "-w", str(WEB_PROCESSES)]
        + ["-b", f"127.0.0.1:{port}", "--log-level", "warning", application],
        env=stack.env,
    )
    stack.processes.append(server)
    wait_until(lambda: port_open(port), timeout=60, what=f"gunicorn {application} (log: {server.log_path})")
    return server, port


def _process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending.extend(children.get(pid, []))
    return tree


def cpu_seconds(root: int) -> float:
    """User + system CPU of a process and its descendants so far."""
    total = 0
    for pid in _process_tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _CLOCK_TICKS


# --- the load: plain HTTP/1.1 over asyncio streams, so the client spends little of the machine's two cores ----


@dataclass(frozen=True)
class Load:
    seconds: float
    accepted: int
    refused: list[str]
    cpu_seconds: float


async def _post(port: int, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """One request on its own connection, so the server's processes share the load as they accept it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{head}\r\n".encode()
        + body
    )
    await writer.drain()
    response = await reader.read()
    writer.close()
    status = int(response.split(b" ", 2)[1])
    return status, response.split(b"\r\n\r\n", 1)[1]


async def _drive(port: int, requests: list[tuple[str, bytes, dict]]) -> tuple[float, int, list[str]]:
    queue = list(reversed(requests))
    refused: list[str] = []

    async def client_loop() -> None:
        while queue:
            path, body, headers = queue.pop()
            status, answer = await _post(port, path, body, headers)
            if status != 202:
                refused.append(f"{status} {answer[:200]!r}")

    started = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(CLIENT_CONCURRENCY)))
    return time.perf_counter() - started, len(requests) - len(refused), refused


def run_load(server: ServiceProcess, port: int, make_request, count: int) -> Load:
    asyncio.run(_drive(port, [make_request(index) for index in range(WARM_UP_REQUESTS)]))
    requests = [make_request(index) for index in range(count)]
    cpu_before = cpu_seconds(server.process.pid)
    seconds, accepted, refused = asyncio.run(_drive(port, requests))
    return Load(seconds, accepted, refused, cpu_seconds(server.process.pid) - cpu_before)


def endpoint_request(tokens: list[str]):
    def make(index: int) -> tuple[str, bytes, dict]:
        body = json.dumps({"clientMessageId": str(uuid.uuid4()), "text": f"message {index}"}).encode()
        return "/api/v1/conversation/messages", body, {"Authorization": f"Bearer {tokens[index % len(tokens)]}"}

    return make


def bare_view_request(owner_ids: list[int]):
    def make(index: int) -> tuple[str, bytes, dict]:
        return f"/admit/{owner_ids[index % len(owner_ids)]}", json.dumps({"text": f"message {index}"}).encode(), {}

    return make


# --- the ceiling: pgbench running the admission statement ----------------------------------------------------

_OWNER_SENTINEL = 2_000_000_001
_CLIENT_ID_SENTINEL = "bench-client-message-id"


def admission_script(owner_ids: list[int], active_run_cap: int) -> str:
    """A pgbench script of the admission statement exactly as the service builds it, in one transaction.

    The statement is rendered with sentinel values, which then become pgbench variables: a random owner among the
    benchmark's users (their ids are consecutive) and fresh ids per transaction, derived from one random number.
    """
    from django.db import connection
    from psycopg import ClientCursor

    from runtime.services import admission

    if owner_ids != list(range(owner_ids[0], owner_ids[0] + len(owner_ids))):
        raise ValueError("the benchmark's users must have consecutive ids")
    owner = SimpleNamespace(pk=_OWNER_SENTINEL)
    command = admission.MessageCommand(client_message_id=_CLIENT_ID_SENTINEL, text="message from pgbench")
    statement = admission.admission_statement(
        owner,
        admission.MainChatTarget(owner),
        command,
        command.fingerprint("main_chat"),
        active_run_cap,
        policy_decided=False,
    )
    connection.ensure_connection()
    sql = ClientCursor(connection.connection).mogrify(statement.sql, statement.params)
    sql = sql.replace(str(_OWNER_SENTINEL), ":owner").replace(f"'{_CLIENT_ID_SENTINEL}'", "('pgbench-' || :r)")
    rows = {"m1": statement.user_message, "m2": statement.submission.assistant_message_id, "s": statement.submission}
    rows["r"] = statement.run
    for slot, row in rows.items():
        row_id = row if isinstance(row, uuid.UUID) else row.id
        for spelling in (str(row_id), row_id.hex):
            sql = sql.replace(f"'{spelling}'", f"(md5('{slot}' || :r)::uuid)")
    header = f"\\set r random(1, 1000000000000)\n\\set owner random({owner_ids[0]}, {owner_ids[-1]})\n"
    return header + "BEGIN;\n" + " ".join(sql.split()) + ";\nCOMMIT;\n"


def pgbench_admission_tps(database: str, owner_ids: list[int], active_run_cap: int, seconds: int) -> tuple[float, int]:
    """Transactions per second, and how many submissions the run really admitted (a check on the script)."""
    from django.db import connection

    with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
        script.write(admission_script(owner_ids, active_run_cap))
        script.flush()
        result = subprocess.run(
            ["pgbench", "-h", PGHOST, "-p", PGPORT, "-U", PGUSER, "-n", "-c", str(CLIENT_CONCURRENCY), "-j", "2"]
            + ["-T", str(seconds), "-f", script.name, database],
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        raise RuntimeError(f"pgbench failed: {result.stderr[-2000:]}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runtime_submission WHERE client_message_id LIKE 'pgbench-%%'")
        (admitted,) = cursor.fetchone()
    if not admitted:
        raise RuntimeError("pgbench admitted nothing: its statement was refused (active-run cap?)")
    return float(re.search(r"tps = ([0-9.]+)", result.stdout).group(1)), admitted


def ensure_main_conversations(owner_ids: list[int]) -> None:
    """The statement admits into an existing Main Chat; the endpoint creates one on a user's first message."""
    from django.contrib.auth import get_user_model

    from runtime.services.commands import ensure_main_conversation

    for user in get_user_model().objects.filter(id__in=owner_ids):
        ensure_main_conversation(user)


# --- the figures ----------------------------------------------------------------------------------------------


def _notes(load: Load, count: int) -> list[str]:
    notes = [f"CPU per admission (server processes): {1000 * load.cpu_seconds / max(1, load.accepted):.2f} ms"]
    if load.refused:
        notes.append(f"{len(load.refused)} of {count} refused, first: {load.refused[0]}")
    else:
        notes.append(f"all {count} accepted")
    return notes


def measure(stack, users: list[tuple[int, str]], database: str, *, count: int, seconds: int) -> list[Figure]:
    owner_ids = [user_id for user_id, _ in users]
    tokens = [token for _, token in users]
    ensure_main_conversations(owner_ids)

    server, port = start_server(stack, "impo.asgi:application")
    endpoint = run_load(server, port, endpoint_request(tokens), count)
    server.stop()
    bare, bare_port = start_server(stack, "bench.admission_asgi:application")
    bare_view = run_load(bare, bare_port, bare_view_request(owner_ids), count)
    bare.stop()
    # The servers' cap (the stack's), so that pgbench's statement is the one they ran.
    ceiling, admitted = pgbench_admission_tps(database, owner_ids, int(stack.env["IMPO_LIMIT_ACTIVE_RUNS"]), seconds)

    baseline_name = f"pgbench of the admission statement, {CLIENT_CONCURRENCY} clients ({admitted} admitted)"
    servers = f"gunicorn + {WEB_PROCESSES} uvicorn workers"
    return [
        Figure(
            f"admission endpoint, {len(users)} conversations, {servers}",
            endpoint.accepted / endpoint.seconds,
            "req/s",
            baseline_name=baseline_name,
            baseline=ceiling,
            notes=_notes(endpoint, count),
        ),
        Figure(
            f"bare Django view of the admission statement, {servers}",
            bare_view.accepted / bare_view.seconds,
            "req/s",
            baseline_name=baseline_name,
            baseline=ceiling,
            notes=_notes(bare_view, count),
        ),
    ]
