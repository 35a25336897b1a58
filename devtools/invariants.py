"""Invariants checked after a chaos run (tests/chaos/), or after a benchmark's killed worker host (bench/inflight.py),
over the database, the double's state and what clients saw.

Each check returns human-readable violations instead of asserting, so one run reports all of them.
"""

import json
import uuid
from collections import Counter, defaultdict
from typing import Protocol

import httpx

from devtools.records import SETTLED_STATES, ChaosUser, ConversationRecord, Figures
from devtools.stack import Stack
from devtools.websocket import Refused, WebsocketConnection

# How long a check waits for the web server's answer: what is checked is the answer, not its speed, and a web
# process the run killed last may still be booting on a loaded machine (36 s was seen) when the checks ask.
PROBE_TIMEOUT_SECONDS = 90


class CheckedRun(Protocol):
    """What the checks read of a run: its users and what their clients recorded, its figures (the checks count the
    runs' outcomes into them), the stack it ran on, and the web server's addresses (for the cross-user probes)."""

    users: list[ChaosUser]
    records: list[ConversationRecord]
    figures: Figures
    stack: Stack
    web_url: str
    ws_base: str


def check_all(chaos: CheckedRun) -> list[str]:
    double_state = chaos.stack.double.state()
    checks = [
        lambda: check_client_errors(chaos),
        lambda: check_commands_settled(chaos),
        lambda: check_remote_agents(chaos, double_state),
        lambda: check_remote_sessions(chaos, double_state),
        lambda: check_one_turn_per_run(chaos, double_state),
        lambda: check_one_input_per_run_and_no_steering(chaos, double_state),
        lambda: check_event_sequences(chaos),
        lambda: check_assistant_text(chaos),
        lambda: check_tool_side_effects(chaos, double_state),
        lambda: check_websocket_views(chaos),
        lambda: check_no_cross_user_visibility(chaos),
    ]
    violations = []
    for check in checks:
        violations.extend(check())
    return violations


def _submission_ids(chaos: CheckedRun) -> list[str]:
    return [command.submission_id for record in chaos.records for command in record.commands]


def check_client_errors(chaos: CheckedRun) -> list[str]:
    return [f"conversation {record.index}: {error}" for record in chaos.records for error in record.errors]


def check_commands_settled(chaos: CheckedRun) -> list[str]:
    """Every accepted command exists once, settled; and nothing was admitted that no client sent."""
    from runtime.models import Run, Submission

    violations = []
    accepted = set(_submission_ids(chaos))
    runs = {str(run.submission_id): run for run in Run.objects.filter(submission__owner_id__in=_user_ids(chaos))}
    for submission_id in accepted - set(runs):
        violations.append(f"accepted submission {submission_id} has no run")
    for submission_id, run in runs.items():
        chaos.figures.outcomes[run.state if run.state != "failed" else f"failed:{run.error_code}"] += 1
        if submission_id not in accepted:
            violations.append(f"run {run.id} (submission {submission_id}) was admitted without a client receipt")
        if run.state not in SETTLED_STATES:
            violations.append(f"run {run.id} ended the scenario in state {run.state}")
    duplicates = Submission.objects.filter(owner_id__in=_user_ids(chaos)).values_list("client_message_id", flat=True)
    for client_message_id, count in Counter(duplicates).items():
        if count > 1:
            violations.append(f"clientMessageId {client_message_id} admitted {count} times")
    return violations


def _user_ids(chaos: CheckedRun) -> list[int]:
    return [user.id for user in chaos.users]


def _sessions_deleted_on_purpose() -> set[str]:
    """The remote ids of the sessions Impo deleted at the provider on purpose: a deleted conversation's, and those of
    an agent its owner's new instructions retired (docs/data-lifecycle.md "Deleting")."""
    from rebyte.models import DeletionIntent, DeletionState, IntentKind

    done = DeletionIntent.objects.filter(kind=IntentKind.SESSION, state=DeletionState.DONE)
    return set(done.values_list("remote_id", flat=True))


def check_remote_agents(chaos: CheckedRun, double_state: dict) -> list[str]:
    """Exactly one remote agent per user who reached the provider, and it is the one Impo saved as current (those
    the owner's new instructions retired are deleted once the runs on them ended: the settle waits for it)."""
    from rebyte.models import SavedAgent

    violations = []
    by_owner = defaultdict(list)
    for agent in double_state["agents"]:
        by_owner[agent["metadata"].get("impo_owner")].append(agent["id"])
    saved = dict(SavedAgent.objects.filter(gone_at__isnull=True).values_list("owner_id", "remote_id"))
    for owner, agent_ids in by_owner.items():
        if len(agent_ids) != 1:
            violations.append(f"user {owner} has {len(agent_ids)} remote agents: {agent_ids}")
        if owner is None or saved.get(int(owner)) not in agent_ids:
            violations.append(f"remote agents {agent_ids} of user {owner} are not the saved agent {saved.get(owner)}")
    for owner, remote_id in saved.items():
        if str(owner) not in by_owner:
            violations.append(f"saved agent {remote_id} of user {owner} does not exist remotely")
    return violations


def check_remote_sessions(chaos: CheckedRun, double_state: dict) -> list[str]:
    """Every remote session is bound to exactly one local session; one current per conversation.

    More than one session per conversation is legal only as rotation, which leaves the older ones
    historical; so remote sessions == local bindings, and current bindings <= conversations. A binding whose
    session Impo deleted at the provider on purpose (a retired agent's) is history only.
    """
    from rebyte.models import RemoteSession, SessionState

    violations = []
    deleted = _sessions_deleted_on_purpose()
    local = {session.remote_id: session for session in RemoteSession.objects.exclude(remote_id__in=deleted)}
    remote_by_conversation = defaultdict(list)
    for session in double_state["sessions"]:
        remote_by_conversation[session["metadata"].get("impo_conversation")].append(session["id"])
        if session["id"] not in local:
            violations.append(
                f"remote session {session['id']} (conversation {session['metadata'].get('impo_conversation')}) "
                "has no local binding: a duplicate creation"
            )
    for remote_id in local:
        if remote_id not in {s["id"] for s in double_state["sessions"]}:
            violations.append(f"local session binding {remote_id} does not exist remotely")
    current = Counter(
        str(session.conversation_id) for session in local.values() if session.state == SessionState.CURRENT
    )
    for conversation_id, remote_ids in remote_by_conversation.items():
        rotated = sum(
            1
            for session in local.values()
            if str(session.conversation_id) == conversation_id and session.state == SessionState.HISTORICAL
        )
        if len(remote_ids) != rotated + 1 or current[conversation_id] != 1:
            violations.append(
                f"conversation {conversation_id}: {len(remote_ids)} remote sessions, {rotated} rotated, "
                f"{current[conversation_id]} current"
            )
    return violations


def check_one_turn_per_run(chaos: CheckedRun, double_state: dict) -> list[str]:
    """Each run is bound to at most one remote turn, its own, and a completed run has one; no turn is
    bound to two runs. (A turn of a session Impo deleted on purpose, a retired agent's, is no longer read.)"""
    from rebyte.models import RemoteTurn

    violations = []
    turns = {turn["id"]: turn for session in double_state["sessions"] for turn in session["turns"]}
    deleted = _sessions_deleted_on_purpose()
    bound = Counter()
    bindings = RemoteTurn.objects.filter(run__submission_id__in=_submission_ids(chaos)).select_related("run", "session")
    for remote_turn in bindings:
        run = remote_turn.run
        if remote_turn.turn_id:
            bound[remote_turn.turn_id] += 1
            if remote_turn.turn_id not in turns and remote_turn.session.remote_id not in deleted:
                violations.append(f"run {run.id} is bound to turn {remote_turn.turn_id}, which does not exist")
        elif run.state == "completed":
            violations.append(f"run {run.id} completed without a remote turn")
    for turn_id, count in bound.items():
        if count > 1:
            violations.append(f"turn {turn_id} is bound to {count} runs")
    return violations


def check_one_input_per_run_and_no_steering(chaos: CheckedRun, double_state: dict) -> list[str]:
    """The provider received each run's input once (a first input at session creation, or one keyed
    message event, resends deduplicated), and never a message while a turn was active."""
    from runtime.models import Run

    violations = [
        f"input steered turn {steer['turn_id']} of session {steer['session_id']}: {steer['text']!r}"
        for steer in double_state["steering"]
    ]
    messages = Counter(
        event["idempotency_key"]
        for event in double_state["input_events"]
        if event["type"] == "agent.session.input.message"
    )
    first_inputs = Counter(session["metadata"].get("impo_intent") for session in double_state["sessions"])
    for run in Run.objects.filter(submission_id__in=_submission_ids(chaos)):
        sent = messages.get(f"impo-run-{run.id}", 0)
        if sent > 1:
            violations.append(f"run {run.id}: its input message was applied {sent} times")
    for key, count in messages.items():
        if not key or not key.startswith("impo-run-"):
            violations.append(f"an input message without a run's key ({key!r}) was applied {count} times")
    for intent, count in first_inputs.items():
        if count > 1:
            violations.append(f"creation intent {intent} made {count} sessions (each with a first input)")
    return violations


def check_event_sequences(chaos: CheckedRun) -> list[str]:
    from runtime.models import Conversation, Event

    violations = []
    # A deleted conversation's events go when it is purged (devtools/lifecycle_invariants.py checks that).
    for conversation in Conversation.objects.filter(owner_id__in=_user_ids(chaos), deleted_at__isnull=True):
        seqs = list(Event.objects.filter(conversation=conversation).order_by("seq").values_list("seq", flat=True))
        if seqs != list(range(1, len(seqs) + 1)) or conversation.last_event_seq != len(seqs):
            violations.append(
                f"conversation {conversation.id}: event seqs are not 1..{conversation.last_event_seq} "
                f"without gaps ({len(seqs)} events)"
            )
    return violations


def expected_reply(command, note_id: str | None) -> str:
    if command.note_text is None:
        return f"Echo: {command.text}{command.file_notes}"
    output = {"noteId": note_id}
    return f"Tool save_note returned: {json.dumps(output, sort_keys=True, separators=(',', ':'))}"


def since_the_reply_restarted(events) -> list:
    """A run's events after the last line that withdrew its reply's text (docs/api.md `run.session_replaced`)."""
    events = list(events)
    restarts = [i for i, event in enumerate(events) if event.payload.get("replyRestarted")]
    return events[restarts[-1] + 1 :] if restarts else events


def check_assistant_text(chaos: CheckedRun) -> list[str]:
    """The assistant message is the concatenation of its deltas (since a lost session's half of it was withdrawn);
    complete and exact when completed."""
    from runtime.models import Event, EventType, Run
    from tools.models import Note

    violations = []
    notes = dict(Note.objects.values_list("text", "id"))
    for record in chaos.records:
        for command in record.commands:
            run = Run.objects.select_related("submission__assistant_message").get(submission_id=command.submission_id)
            message = run.submission.assistant_message
            logged = Event.objects.filter(submission_id=command.submission_id).order_by("seq")
            events = since_the_reply_restarted(logged)
            deltas = "".join(event.payload["delta"] for event in events if event.type == EventType.TEXT_DELTA)
            completed = [event for event in events if event.type == EventType.MESSAGE_COMPLETED]
            note_id = str(notes[command.note_text]) if command.note_text in notes else None
            expected = expected_reply(command, note_id)
            where = f"submission {command.submission_id} ({run.state}, {command.text!r})"
            if message.text != deltas:
                violations.append(f"{where}: message text {message.text!r} != its deltas {deltas!r}")
            if command.reply_prefix is not None:  # its words are known only as far as the prefix
                expected = message.text if message.text.startswith(command.reply_prefix) else command.reply_prefix
            if run.state == "completed":
                if message.text != expected:
                    violations.append(f"{where}: text {message.text!r}, expected {expected!r}")
                if [event.payload["text"] for event in completed] != [expected]:
                    violations.append(f"{where}: message.completed events {[e.payload for e in completed]}")
            elif not expected.startswith(message.text) and command.note_text is None and not command.reply_prefix:
                violations.append(f"{where}: partial text {message.text!r} is not a prefix of {expected!r}")
            terminal = [event.type for event in events if event.type.startswith("run.") and event.type != "run.started"]
            if run.state in ("completed", "failed", "cancelled") and terminal[-1:] != [f"run.{run.state}"]:
                violations.append(f"{where}: final run event {terminal[-1:]} does not match the state")
    return violations


def check_tool_side_effects(chaos: CheckedRun, double_state: dict) -> list[str]:
    """A transactional tool acted at most once per command, exactly once if its run completed; and
    the provider received one output per call, identical on every resubmission."""
    from runtime.models import Run
    from tools.models import Note, ToolCall, ToolReceipt

    violations = []
    for record in chaos.records:
        for command in record.commands:
            if command.note_text is None:
                continue
            notes = Note.objects.filter(text=command.note_text).count()
            state = Run.objects.get(submission_id=command.submission_id).state
            if notes > 1 or (state == "completed" and notes != 1):
                violations.append(f"save_note of {command.submission_id} ({state}) wrote {notes} notes")
    results = Counter(
        event["event"]["call_id"]
        for event in double_state["input_events"]
        if event["type"] == "agent.session.input.tool_result"
    )
    for call_id, count in results.items():
        if count != 1:
            violations.append(f"call {call_id} got {count} results upstream")
    receipts = Counter(ToolReceipt.objects.values_list("tool_call_id", flat=True))
    for call_id, count in receipts.items():
        if count > 1:
            violations.append(f"call {call_id} has {count} receipts")
    for call in ToolCall.objects.filter(side_effect="uncertain", attempts__gt=1):
        violations.append(f"uncertain call {call.call_id} was dispatched {call.attempts} times")
    return violations


def check_websocket_views(chaos: CheckedRun) -> list[str]:
    """Each connection delivered a gapless, increasing run from its `after`; de-duplicated by seq,
    the client saw every event of its conversation once, exactly as the database has it."""
    from runtime import selectors

    violations = []
    for record in chaos.records:
        if record.conversation_id is None:
            continue
        log = selectors.events_after(record.conversation_id, 0, limit=100_000)
        for number, connection in enumerate(record.connections):
            if connection.seqs and connection.seqs != list(
                range(connection.after + 1, connection.after + 1 + len(connection.seqs))
            ):
                violations.append(
                    f"conversation {record.index}, connection {number} (after={connection.after}): "
                    f"seqs not gapless/increasing: {_compact(connection.seqs)}"
                )
        seen = [record.seen[seq] for seq in sorted(record.seen)]
        if [event["seq"] for event in seen] != [event["seq"] for event in log]:
            violations.append(
                f"conversation {record.index}: client saw seqs {_compact(sorted(record.seen))}, "
                f"the log has 1..{len(log)}"
            )
        for received, stored in zip(seen, log, strict=False):
            if received != json.loads(json.dumps(stored)):
                violations.append(f"conversation {record.index}: event {stored['seq']} differs from the log")
                break
    return violations


def _compact(seqs: list[int]) -> str:
    return str(seqs) if len(seqs) <= 20 else f"{seqs[:10]} … {seqs[-10:]}"


def check_no_cross_user_visibility(chaos: CheckedRun) -> list[str]:
    """Another user's token gets a refused socket and 404s for every REST id of this user."""
    violations = []
    owners = {user.id: user for user in chaos.users}
    for record in chaos.records:
        if record.conversation_id is None:
            continue
        for intruder in owners.values():
            if intruder.id == record.user.id:
                continue
            violations.extend(_intrusions(chaos, record, intruder.token))
            break  # one other user per conversation keeps the check quick; all users are intruders somewhere
    return violations


def _intrusions(chaos: CheckedRun, record: ConversationRecord, token: str) -> list[str]:
    violations = []
    url = f"{chaos.ws_base}/ws/v1/conversations/{record.conversation_id}/?after=0&token={token}"
    try:
        socket = WebsocketConnection(url)
    except Refused:
        pass
    else:
        socket.abort()
        violations.append(f"another user's token opened the socket of conversation {record.conversation_id}")
    submission_id = record.commands[0].submission_id
    probes = [
        ("GET", f"/api/v1/submissions/{submission_id}", None),
        ("POST", f"/api/v1/submissions/{submission_id}/cancel", {}),
        ("GET", f"/api/v1/submissions/{submission_id}/stream", None),
    ]
    if record.task_id:
        probes += [
            ("GET", f"/api/v1/tasks/{record.task_id}/conversation", None),
            ("POST", f"/api/v1/tasks/{record.task_id}/messages", {"clientMessageId": str(uuid.uuid4()), "text": "x"}),
        ]
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=chaos.web_url, headers=headers, timeout=PROBE_TIMEOUT_SECONDS) as http:
        for method, path, body in probes:
            response = http.request(method, path, json=body)
            if response.status_code != 404:
                violations.append(f"{method} {path} with another user's token answered {response.status_code}")
        listed = {task["taskId"] for task in http.get("/api/v1/tasks").json()["tasks"]}
        if record.task_id in listed:
            violations.append(f"task {record.task_id} is listed for another user")
        page = http.get("/api/v1/conversation").json()
        if page["conversationId"] == record.conversation_id:
            violations.append(f"conversation {record.conversation_id} is another user's main chat")
    return violations
