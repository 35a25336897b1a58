"""A device's side of the tool bridge, as its app drives it over the API.

`client` is the test's in-process API client (DRF's `APIClient`) or, where a real web server must see the
requests, an `httpx.Client` with that server's base URL and the user's bearer token.
"""

from tests.client import post


def register_device(client, installation_id: str = "phone-1", tools=("play_sound",)) -> str:
    response = post(client, "/api/v1/devices/register", {"installationId": installation_id, "tools": list(tools)})
    assert response.status_code == 200, response.content
    return response.json()["deviceId"]


def claim(client, invocation_id, device_id: str):
    return post(client, f"/api/v1/device-tool-invocations/{invocation_id}/claim", {"deviceId": device_id})


def report(client, invocation_id, device_id: str, execution_id: str, **result):
    """The device's result for its execution: a success playing the sound unless `result` says otherwise."""
    body = {"deviceId": device_id, "executionId": execution_id, "success": True, "output": {"played": True}}
    return post(client, f"/api/v1/device-tool-invocations/{invocation_id}/result", {**body, **result})


def device_answers(client, device_id: str, invocation_id, output) -> None:
    """The device claims the invocation and reports that it succeeded with `output`."""
    claimed = claim(client, invocation_id, device_id)
    assert claimed.status_code == 200, claimed.content
    reported = report(client, invocation_id, device_id, claimed.json()["executionId"], output=output)
    assert reported.status_code == 200, reported.content
