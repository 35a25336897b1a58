"""The senders' HTTP clients: kept for as long as their sender runs, so an attempt reuses the connection (and TLS
session) of the one before it to the same host instead of a handshake (and, with a client made per attempt, a
certificate store read: about 110 ms of CPU) each time.

One client per host. Requests go to the address checked (`targets.pinned_request`) and a client pools connections
by that address: a client shared between hosts could send one host's request on a TLS session whose certificate was
checked for another host at the same address. The clients are bounded (the least recently used one is closed past
`max_hosts`), for webhook receivers are as many as users name. Thread-safe: a sender's threads share them.
"""

import ssl
import threading
import time
from collections import OrderedDict

import httpx
from django.conf import settings

# What is read of an answer's body so its connection can carry the next request; a longer or slower body ends the
# connection instead (only the status is recorded).
MAX_DRAINED_BYTES = 16 * 1024


class HostClients:
    def __init__(self, *, verify: ssl.SSLContext | bool = True, max_hosts: int = 64) -> None:
        self._verify = verify
        self._max_hosts = max_hosts
        self._lock = threading.Lock()
        self._clients: OrderedDict[str, httpx.Client] = OrderedDict()

    def for_host(self, host: str) -> httpx.Client:
        evicted = None
        with self._lock:
            client = self._clients.get(host)
            if client is None:
                client = self._clients[host] = httpx.Client(
                    timeout=settings.IMPO_WEBHOOK_TIMEOUT_SECONDS,
                    follow_redirects=False,
                    trust_env=False,
                    verify=self._verify,
                )
                if len(self._clients) > self._max_hosts:
                    _, evicted = self._clients.popitem(last=False)
            self._clients.move_to_end(host)
        if evicted is not None:
            evicted.close()  # an attempt still using it fails as a lost connection, and is tried again
        return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), OrderedDict()
        for client in clients:
            client.close()


def post_status(client: httpx.Client, request: httpx.Request) -> httpx.Response:
    """Sends the request and returns its response, closed: the body is read (bounded in size and in time, so a
    receiver cannot hold the attempt open) only so that the connection can be used again."""
    response = client.send(request, stream=True)
    try:
        deadline = time.monotonic() + settings.IMPO_WEBHOOK_TIMEOUT_SECONDS
        read = 0
        for chunk in response.iter_raw():
            read += len(chunk)
            if read > MAX_DRAINED_BYTES or time.monotonic() > deadline:
                break
    finally:
        response.close()
    return response
