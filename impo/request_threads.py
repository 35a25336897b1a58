from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext


class ReusedRequestThreads:
    """Runs each HTTP request's synchronous code (middleware, DRF views, the ORM) on a thread kept from earlier
    requests instead of one made for it.

    Django under ASGI gives every request a thread-sensitive context of its own, and asgiref a new one-thread
    executor for each: a thread started and joined per request, and every thread-local client (the database
    connection's, Celery's, Redis's) rebuilt with it. Here a request borrows an idle one-thread executor, or
    makes one when all are busy, and gives it back when it has answered. Django's own per-request context, inside
    this one, then uses the borrowed thread (asgiref lets only the outermost context without an executor choose).
    Still one request per thread at a time, as Django expects; connections are returned to the pool at the end of
    each request as before.
    """

    def __init__(self, application):
        self._application = application
        self._idle: list[ThreadPoolExecutor] = []

    async def __call__(self, scope, receive, send):
        executor = self._idle.pop() if self._idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self._application(scope, receive, send)
        finally:
            self._idle.append(executor)
