"""`PUT /api/v1/messages/{id}/feedback`: the owner's thumbs up or down on a reply, changeable, shown in history and
kept in the account's export; nobody else's and no user message can be rated."""

import pytest

from tests.accounts.test_export_of_an_account import export
from tests.client import history, post_message

pytestmark = pytest.mark.django_db


def rate(client, message_id, rating):
    return client.put(f"/api/v1/messages/{message_id}/feedback", {"rating": rating}, format="json")


def feedback_in_history(client) -> dict:
    return {message["id"]: message["feedback"] for message in history(client)["messages"]}


def test_a_reply_is_rated_up_then_down_then_not_at_all_and_history_says_so(api):
    receipt = post_message(api)
    reply = receipt["replyMessageId"]
    assert feedback_in_history(api)[reply] is None

    for rating in ("up", "down", "down", None):
        response = rate(api, reply, rating)

        assert response.status_code == 200, response.content
        assert response.json() == {"messageId": reply, "feedback": rating}
        assert feedback_in_history(api) == {receipt["userMessageId"]: None, reply: rating}


def test_another_users_reply_and_a_user_message_are_not_found(api, other_api):
    receipt = post_message(api)

    assert rate(other_api, receipt["replyMessageId"], "down").status_code == 404
    assert rate(api, receipt["userMessageId"], "up").status_code == 404
    assert feedback_in_history(api)[receipt["replyMessageId"]] is None


@pytest.mark.parametrize("body", [{"rating": "meh"}, {"rating": 1}, {}, {"rating": "up", "why": "x"}])
def test_a_rating_that_is_not_up_down_or_null_is_refused(api, body):
    reply = post_message(api)["replyMessageId"]

    response = api.put(f"/api/v1/messages/{reply}/feedback", body, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


@pytest.mark.django_db(transaction=True)
def test_the_export_keeps_the_rating(shared_web, api, user):
    reply = post_message(api)["replyMessageId"]
    rate(api, reply, "up")

    _, _, exported = export(shared_web, user)

    messages = exported["conversations"][0]["messages"]
    assert [message["feedback"] for message in messages] == [None, "up"]
