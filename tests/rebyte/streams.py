"""Reading a session's event stream from the double, as the tests of its streams do."""


def read_until_idle(stream, into: list) -> None:
    """Appends the stream's events to `into` up to the session's idle after a turn, then closes the stream (the
    server never ends it). Run in a thread when the test must send while the stream is open."""
    try:
        for event in stream:
            into.append(event)
            if event.type == "agent.session.idle":
                return
    finally:
        stream.close()
