from devtools.stack import wait_until
from rebyte.models import RemoteSession, SessionState
from runtime.models import Run


def send_and_wait(api, client_message_id, text):
    receipt = api.post(
        "/api/v1/conversation/messages", {"clientMessageId": client_message_id, "text": text}, format="json"
    ).json()
    wait_until(
        lambda: Run.objects.filter(submission_id=receipt["submissionId"], state="completed").exists(),
        timeout=60,
        what=f"{text!r} to complete",
    )


def test_a_rotated_main_chat_keeps_its_whole_history_readable(stack, api, rebyte_double):
    stack.env["IMPO_SESSION_MAX_TURNS"] = "1"
    stack.start_worker()

    send_and_wait(api, "m-1", "first question")
    send_and_wait(api, "m-2", "second question")

    old, new = RemoteSession.objects.order_by("created_at")
    assert (old.state, old.rotation_reason, old.first_message_sequence, old.last_message_sequence) == (
        SessionState.HISTORICAL,
        "turns",
        1,
        2,
    )
    assert (new.state, new.first_message_sequence, new.last_message_sequence) == (SessionState.CURRENT, 3, 4)
    state = rebyte_double.state()
    assert state["counts"]["sessions"] == 2
    # The new session starts with the last completed turn carried over, then the user's own words.
    first_input = next(item for item in state["sessions"][1]["items"] if item.get("role") == "user")
    carry, text = (part["text"] for part in first_input["content"])
    assert "User: first question\nAssistant: Echo: first question" in carry
    assert text == "second question"
    history = api.get("/api/v1/conversation").json()["messages"]
    assert [message["text"] for message in history] == [
        "first question",
        "Echo: first question",
        "second question",
        "Echo: second question",
    ]
