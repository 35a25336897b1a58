import re
import uuid

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from whitenoise.middleware import WhiteNoiseMiddleware

# A caller-supplied id is echoed only when it is short and printable, so it cannot inject headers
# or flood logs; anything else is replaced by a fresh id.
_ACCEPTABLE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def request_id_for(request) -> str:
    return getattr(request, "request_id", "") or ""


class _EitherMode:
    """A middleware that runs in whichever mode its chain runs. Under ASGI a sync-only middleware makes Django hop
    to a thread and back around the rest of the chain on every request; the view's own hop is the only one due."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.acall(request)
        return self.call(request)

    def call(self, request):
        raise NotImplementedError

    async def acall(self, request):
        raise NotImplementedError


class RequestIdMiddleware(_EitherMode):
    """Gives every request an id, echoed in `X-Request-Id` and in every ICA error body."""

    def call(self, request):
        return self._stamped(request, self.get_response(self._identified(request)))

    async def acall(self, request):
        return self._stamped(request, await self.get_response(self._identified(request)))

    @staticmethod
    def _identified(request):
        offered = request.headers.get("X-Request-Id", "")
        request.request_id = offered if _ACCEPTABLE_REQUEST_ID.match(offered) else str(uuid.uuid4())
        return request

    @staticmethod
    def _stamped(request, response):
        response["X-Request-Id"] = request.request_id
        return response


class StaticFilesMiddleware(_EitherMode, WhiteNoiseMiddleware):
    """WhiteNoise's static files, served from either mode (its own middleware is sync-only)."""

    def __init__(self, get_response):
        WhiteNoiseMiddleware.__init__(self, get_response)
        _EitherMode.__init__(self, get_response)

    def call(self, request):
        return WhiteNoiseMiddleware.__call__(self, request)

    async def acall(self, request):
        if self.autorefresh:
            # DEBUG: a lookup on disk, kept off the event loop.
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)
