from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler

# Threads kept for later requests; a burst above this (long streams, say) leaves only this many idle behind it.
MAX_IDLE_THREADS = 32


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
