"""`GET`/`PUT /api/v1/account/instructions`: the owner's standing instructions to their agent, each account its own,
bounded, the same text again a no-op; in the export. (What the provider is told: tests/rebyte/
test_custom_instructions_by_workers.py.)"""

import pytest

from rebyte.models import OWNER_INSTRUCTIONS_MAX_CHARS, OwnerInstructions

pytestmark = pytest.mark.django_db

URL = "/api/v1/account/instructions"


def put(client, text):
    return client.put(URL, {"text": text}, format="json")


def test_an_account_without_instructions_reads_blank_with_its_bound(api):
    response = api.get(URL)

    assert response.status_code == 200
    assert response.json() == {"text": "", "maxLength": OWNER_INSTRUCTIONS_MAX_CHARS, "updatedAt": None}


def test_saved_instructions_are_read_back_trimmed(api):
    response = put(api, "  Answer in French.\nKeep it short.  ")

    assert response.status_code == 200, response.content
    assert response.json()["text"] == "Answer in French.\nKeep it short."
    assert response.json()["updatedAt"] is not None
    assert api.get(URL).json() == response.json()


def test_the_same_text_again_changes_nothing_not_even_its_time(api):
    first = put(api, "Answer in French.").json()

    again = put(api, "Answer in French.")

    assert again.status_code == 200
    assert again.json() == first
    assert OwnerInstructions.objects.count() == 1


def test_blank_takes_the_instructions_back(api):
    put(api, "Answer in French.")

    response = put(api, "   ")

    assert response.status_code == 200
    assert response.json()["text"] == ""
    assert api.get(URL).json()["text"] == ""


def test_each_account_sees_and_changes_only_its_own(api, other_api):
    put(api, "Mine.")

    assert other_api.get(URL).json()["text"] == ""
    put(other_api, "Theirs.")
    assert api.get(URL).json()["text"] == "Mine."
    assert other_api.get(URL).json()["text"] == "Theirs."


def test_the_bound_is_kept_and_one_character_more_is_a_clear_refusal(api):
    assert put(api, "x" * OWNER_INSTRUCTIONS_MAX_CHARS).status_code == 200

    response = put(api, "y" * (OWNER_INSTRUCTIONS_MAX_CHARS + 1))

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "1500" in str(error)
    assert api.get(URL).json()["text"] == "x" * OWNER_INSTRUCTIONS_MAX_CHARS


@pytest.mark.parametrize("body", [{}, {"text": None}, {"text": 7}, {"text": "a\x00b"}, {"text": "x", "more": 1}])
def test_a_body_without_one_text_is_refused(api, body):
    response = api.put(URL, body, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


def test_without_credentials_nothing_is_read_or_written(client):
    assert client.get(URL).status_code == 401
    assert client.put(URL, {"text": "x"}, content_type="application/json").status_code == 401
    assert not OwnerInstructions.objects.exists()
