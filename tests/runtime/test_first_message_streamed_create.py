"""A conversation's first message: its session is created with the input and answers with its event stream
(`stream=true`), so the first turn's deltas are placed from that stream like any later turn's (docs/design.md §1.4).
Real workers, the double over HTTP."""

import json
from collections import Counter

import psycopg
from websockets.sync.client import connect

from devtools.stack import wait_until
from runtime.models import Message, MessageRole, RunState
from tests.client import event_types, finished_run, history, post_message, socket_url, streamed_text, token_of
from tests.concurrency import database_parameters


def provider_calls(double) -> Counter:
    return Counter(request["op"] for request in double.requests())


def test_a_first_message_streams_from_its_create_and_reads_the_truth_only_at_its_end(workers, api, rebyte_double):
    rebyte_double.configure(delta_delay_ms=100, delta_chunks=8)

    receipt = post_message(api, "a first message, streamed")

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert streamed_text(receipt["submissionId"]) == "Echo: a first message, streamed"
    assert event_types(receipt["submissionId"]).count("text.delta") >= 3
    (create,) = [request for request in rebyte_double.requests() if request["op"] == "create_session"]
    assert create["body"]["stream"] is True
    calls = provider_calls(rebyte_double)
    # The create's stream carries the turn from its creation: no live stream of its own, and the truth (the turn and
    # its items) is read when the reply's item and the turn end, not for every batch of deltas.
    assert calls["session_events"] == 0
    assert calls["list_items"] <= 2 and calls["list_turns"] <= 2, calls
    wait_until(lambda: rebyte_double.state()["live_streams"] == {}, timeout=30, what="the create's stream to close")


def test_a_first_messages_deltas_reach_the_conversation_socket_in_order(workers, shared_web, api, user, rebyte_double):
    rebyte_double.configure(delta_delay_ms=150, delta_chunks=6)
    conversation_id = history(api)["conversationId"]
    received = []
    with connect(socket_url(shared_web, conversation_id, token_of(user)), open_timeout=20) as socket:
        receipt = post_message(api, "over the socket")
        while not received or received[-1]["type"] != "run.completed":
            received.append(json.loads(socket.recv(timeout=60)))

    types = [frame["type"] for frame in received]
    deltas = [frame["payload"]["delta"] for frame in received if frame["type"] == "text.delta"]
    assert "".join(deltas) == "Echo: over the socket"
    assert len(deltas) >= 3
    assert types.index("text.delta") < types.index("message.completed")
    seqs = [frame["seq"] for frame in received]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED


def test_the_creates_stream_cut_mid_turn_completes_the_run_once_in_one_session(workers, api, rebyte_double):
    rebyte_double.configure(delta_delay_ms=100, delta_chunks=8)
    # agent.session.created, turn.created, the user's item, turn.in_progress, session.in_progress, the reply's item,
    # then two deltas: cut there.
    rebyte_double.fault("create_session", "cut_stream", after_events=8)

    receipt = post_message(api, "cut in the middle of my reply")

    run = finished_run(receipt["submissionId"])
    expected = "Echo: cut in the middle of my reply"
    assert run.state == RunState.COMPLETED
    assert run.attempts == 1
    assert run.submission.assistant_message.text == expected
    assert streamed_text(receipt["submissionId"]) == expected
    assert event_types(receipt["submissionId"]).count("message.completed") == 1
    state = rebyte_double.state()
    assert (state["counts"]["sessions"], state["counts"]["turns"]) == (1, 1)
    assert state["input_events"] == []  # the input went with the create, never again as a message
    assert state["faults"] == []  # the cut happened


def test_a_worker_killed_during_a_streamed_create_is_reconciled_without_a_duplicate(stack, api, rebyte_double):
    # The worker gets the create's first event (the session exists upstream) and is killed before it adopts the
    # session: the table it must write the adoption to is held, then the worker is SIGKILLed waiting for it.
    doomed = stack.start_worker("doomed")
    stack.start_sweeper()
    rebyte_double.configure(delta_delay_ms=200, delta_chunks=8, listing_lag_ms=700)
    with psycopg.connect(**database_parameters(), autocommit=False) as holder:
        holder.execute("LOCK TABLE rebyte_remotesession IN SHARE MODE")
        receipt = post_message(api, "the worker dies while my session is made")
        wait_until(
            lambda: rebyte_double.state()["counts"]["sessions"] == 1 and adoption_waiting(holder),
            timeout=30,
            what="the worker to wait to adopt the created session",
        )
        doomed.kill()
        holder.rollback()
    stack.start_worker("successor")

    run = finished_run(receipt["submissionId"], timeout=120)
    expected = "Echo: the worker dies while my session is made"
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == expected
    assert streamed_text(receipt["submissionId"]) == expected
    assert Message.objects.filter(role=MessageRole.ASSISTANT, text=expected).count() == 1
    state = rebyte_double.state()
    assert (state["counts"]["sessions"], state["counts"]["turns"]) == (1, 1)
    assert state["input_events"] == [] and state["steering"] == []
    calls = provider_calls(rebyte_double)
    assert calls["create_session"] == 1
    assert calls["list_sessions"] >= 1  # found by listing, never created again


def adoption_waiting(holder) -> bool:
    waiting = holder.execute(
        "SELECT count(*) FROM pg_locks WHERE relation = 'rebyte_remotesession'::regclass AND NOT granted"
    ).fetchone()[0]
    return waiting > 0
