"""The web server: gunicorn supervising uvicorn worker processes that share one port (HTTP, SSE and websockets).

`gunicorn -c python:impo.web_server impo.asgi:application` is what `make run`, the Procfile and the tests start.
One process has one event loop and one thread for database calls; several processes on one listening socket
let the kernel spread connections over the cores. Nothing a request or a socket needs lives only in its
process (limits, subscribers and the live push are in Redis, everything else in PostgreSQL), so any process
may serve any client. Settings come from the environment (docs/operations.md "Configuration").
"""

import ipaddress
import logging
import os
import signal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from uvicorn.workers import UvicornWorker

from core.log_redaction import install_on_web_server_loggers
from core.log_summaries import RepeatedRefusals, flush_all

# Proxy headers (X-Forwarded-For/-Proto) are trusted only from the addresses a deployment names: trusted by
# default, a client could pose as any address to the login throttle.
_forwarded_allow_ips = os.environ.get("IMPO_WEB_FORWARDED_ALLOW_IPS", "")


class ImpoUvicornWorker(UvicornWorker):
    CONFIG_KWARGS = {
        "loop": "uvloop",
        # httptools with the edge's header deadline and per-address connection cap (impo/edge.py).
        "http": "impo.edge:EdgeHttpProtocol",
        "ws": "websockets-sansio",
        # Neither Django nor Channels has startup or shutdown work for the lifespan protocol.
        "lifespan": "off",
        "proxy_headers": bool(_forwarded_allow_ips),
        # On SIGTERM sockets are closed (1012, clients reconnect elsewhere) and requests get this long to end;
        # SSE streams then end with a broken transport, which their clients reconcile.
        "timeout_graceful_shutdown": int(os.environ.get("IMPO_WEB_GRACEFUL_SECONDS", "10")),
        # Clients only listen on a socket; a frame larger than a JSON body may be is closed 1009 by the server.
        "ws_max_size": 64 * 1024,
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # uvicorn logs every socket's path with its query string, where a native app's token is
        # (docs/operations.md "Security").
        install_on_web_server_loggers()

    def init_signals(self):
        super().init_signals()
        # uvicorn stops gracefully on SIGTERM or SIGINT, then raises the signal again against the handler found
        # before it started: this one, which writes the summaries of the 401s, 429s and refused sockets counted
        # since the last interval (core/log_summaries.py) and lets the signal end the process as before.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _summarise_then_end)

    def run(self):
        # The event loop's server owns a listener from the moment it serves on it (asyncio's `create_server(sock=)`
        # contract), and uvloop closes its descriptor when the server closes. Handed gunicorn's wrapper, uvloop then
        # calls the wrapper's close on a descriptor already gone, and the wrapper logs "Error while closing socket
        # [Errno 9] Bad file descriptor" at every shutdown. Handed the socket itself, uvloop detaches it instead, and
        # uvicorn's own close of it afterwards does nothing.
        self.sockets = [listener.sock for listener in self.sockets]
        # A client retrying a socket with a bad token is summarised as Django's 401s are (the settings are loaded:
        # the application was imported before `run`).
        refusals = RepeatedRefusals(interval=settings.IMPO_LOG_SUMMARY_SECONDS)
        logging.getLogger("uvicorn.error").addFilter(refusals)
        super().run()


def _summarise_then_end(signum, frame):
    flush_all()
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


_host = os.environ.get("IMPO_WEB_HOST", "127.0.0.1")
bind = f"{_host}:{os.environ.get('IMPO_WEB_PORT', '8000')}"
workers = int(os.environ.get("IMPO_WEB_PROCESSES", "2"))
worker_class = "impo.web_server.ImpoUvicornWorker"
forwarded_allow_ips = _forwarded_allow_ips or "127.0.0.1"
# The master kills a worker after this long without a sign of life (uvicorn reports from its loop).
timeout = 30
graceful_timeout = ImpoUvicornWorker.CONFIG_KWARGS["timeout_graceful_shutdown"] + 5
# gunicorn's runtime control socket sits at one path per user: two servers on a machine would fight over it.
control_socket_disable = True
# An idle kept-alive connection is closed after this long; a fronting proxy keeps its own idle upstream connections
# shorter (docs/edge.md).
keepalive = int(os.environ.get("IMPO_WEB_KEEPALIVE_SECONDS", "5"))
# Thousands of sockets connect at once after a network blip; the kernel queues them meanwhile.
backlog = 4096


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def forwarded_addresses_warning(host: str, forwarded_allow_ips: str) -> str | None:
    """What to tell an operator who serves beyond loopback without naming a proxy: behind one, every client then has
    the proxy's address, and the login throttle and the connection cap treat them all as one."""
    if forwarded_allow_ips or _is_loopback(host):
        return None
    return (
        f"serving on {host} with IMPO_WEB_FORWARDED_ALLOW_IPS unset: behind a proxy every client has the proxy's "
        "address (login throttling and the per-address connection cap count them as one); set it to the proxy's "
        "address (docs/edge.md)"
    )


def unsafe_start_refusal(host: str) -> str | None:
    """Why the server must not start with these settings, read before it binds: settings that cannot load (no key of
    the deployment's own with DEBUG off), or DEBUG served beyond loopback, where its pages would show settings,
    source and every route to whoever reaches the address (docs/operations.md "Security")."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "impo.settings")
    try:
        debug = settings.DEBUG
    except ImproperlyConfigured as exc:
        return str(exc)
    if debug and not _is_loopback(host):
        return (
            f"DJANGO_DEBUG is on and the server would listen on {host}: debug runs are served on loopback only "
            "(IMPO_WEB_HOST=127.0.0.1); a deployment leaves DJANGO_DEBUG unset"
        )
    return None


def on_starting(server):
    refusal = unsafe_start_refusal(_host)
    if refusal:
        # gunicorn prints a RuntimeError from its master as one line and exits 1, before binding or forking.
        raise RuntimeError(f"refusing to start: {refusal}")


def when_ready(server):
    warning = forwarded_addresses_warning(_host, _forwarded_allow_ips)
    if warning:
        server.log.warning(warning)
