import os
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler

from attachments.tickets import upload_body_bounds
from core.errors import ApplicationError, RequestTooLarge
from impo.edge import BodyRefused, declared_length, read_bounded_body, refusal_headers

# Threads kept for later requests; a burst above this (long streams, say) leaves only this many idle behind it.
MAX_IDLE_THREADS = 32
# A synchronous streaming body (a static file, the export) is read on the request's thread in pieces of about this
# size, each sent before the next is read.
STREAM_PIECE_BYTES = 64 * 1024
# An attachment's upload is written to disk past this much, so ten 10 MiB uploads at once hold little memory.
UPLOAD_SPOOL_BYTES = 64 * 1024

# The body bounds of the request being handled: (bytes, seconds, bytes kept in memory before disk).
_body_bounds: ContextVar[tuple[int, float, int]] = ContextVar("body_bounds")


class HttpHandler(ASGIHandler):
    """Django's ASGI handler, with each request's synchronous work on one thread, reached once.

    - The middleware chain and the view run synchronously, in one call to the request's thread. Loaded for async,
      Django's chain hops to that thread and back for each middleware's request and response halves (about
      fifteen hops a request, each a thread switch under the GIL). An async view still works: Django calls it
      from the chain, on the event loop.
    - The request's thread is kept for later requests. Django gives every request a thread-sensitive context of
      its own and asgiref a new one-thread executor for it: a thread started and joined per request, and every
      thread-local client (the database connection's, Celery's, Redis's) built again. Here a request borrows an
      idle one-thread executor, or makes one when all are busy, and gives it back once answered; Django's own
      context, inside this one, uses it (asgiref lets only the outermost context without an executor choose).
      Still one request per thread at a time; connections go back to the pool at each request's end, as with
      Django's own handler.
    - The body is read within a deadline and a size bound, whatever its framing, and a chunked body's length is
      what the request then says (impo/edge.py). An attachment's upload URL, signed for its manifest, allows the
      manifest's size and time in proportion (attachments/tickets.py), and its body goes to disk as it arrives.
    - A streaming response with a synchronous iterator (WhiteNoise's static files, the account export) is read on
      the request's thread piece by piece. Django's own handler reads the whole of it into memory first, warning
      "StreamingHttpResponse must consume synchronous iterators" once in each web process.
    """

    def __init__(self):
        self._idle_executors: list[ThreadPoolExecutor] = []
        super().__init__()

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)

    async def __call__(self, scope, receive, send):
        if self._idle_executors:
            executor = self._idle_executors.pop()
        else:
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")
        try:
            async with ThreadSensitiveContext(executor=executor):
                await super().__call__(scope, receive, send)
        finally:
            if len(self._idle_executors) < MAX_IDLE_THREADS:
                self._idle_executors.append(executor)
            else:
                executor.shutdown(wait=False)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

    async def handle(self, scope, receive, send):
        upload = upload_body_bounds(scope["path"], scope["query_string"]) if scope["method"] == "PUT" else None
        if upload is None:
            bounds = (
                settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
                settings.IMPO_WEB_BODY_SECONDS,
                settings.FILE_UPLOAD_MAX_MEMORY_SIZE,
            )
        else:
            bounds = *upload, UPLOAD_SPOOL_BYTES
        _body_bounds.set(bounds)
        limit = bounds[0]
        declared = declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse(scope, send, RequestTooLarge(f"The request body exceeds {limit} bytes."))
            return
        try:
            await super().handle(scope, receive, send)
        except BodyRefused as refused:
            await _refuse(scope, send, refused.refusal)

    async def send_response(self, response, send):
        if response.streaming and not response.is_async:
            response.streaming_content = _read_in_pieces(response.streaming_content)
        await super().send_response(response, send)

    async def read_body(self, receive):
        limit, seconds, spool_bytes = _body_bounds.get()
        return await read_bounded_body(receive, limit=limit, seconds=seconds, spool_bytes=spool_bytes)

    def create_request(self, scope, body_file):
        request, error_response = super().create_request(scope, body_file)
        if request is not None and "CONTENT_LENGTH" not in request.META:
            # A chunked body: DRF and Django's form parsers read a request without a length as empty.
            body_file.seek(0, os.SEEK_END)
            request.META["CONTENT_LENGTH"] = str(body_file.tell())
            body_file.seek(0)
        return request, error_response


async def _read_in_pieces(content):
    """Yields a synchronous iterator's bytes, read on the request's thread (where its database connection is)."""
    pieces = iter(content)
    while piece := await sync_to_async(_next_piece, thread_sensitive=True)(pieces):
        yield piece


def _next_piece(pieces) -> bytes:
    """The next chunks of `pieces` joined, about STREAM_PIECE_BYTES of them; b"" once they are all read."""
    joined, size = [], 0
    for chunk in pieces:
        joined.append(chunk)
        size += len(chunk)
        if size >= STREAM_PIECE_BYTES:
            break
    return b"".join(joined)


async def _refuse(scope, send, refusal: ApplicationError) -> None:
    headers, body = refusal_headers(scope, refusal)
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
