"""A device's side of the tool bridge, as its app drives it over the API."""


def device_answers(api, device_id: str, invocation_id: str, output: str) -> None:
    """The device claims the invocation and reports that it succeeded with `output`."""
    execution = api.post(
        f"/api/v1/device-tool-invocations/{invocation_id}/claim", {"deviceId": device_id}, format="json"
    ).json()
    api.post(
        f"/api/v1/device-tool-invocations/{invocation_id}/result",
        {"deviceId": device_id, "executionId": execution["executionId"], "success": True, "output": output},
        format="json",
    )
