"""The base of every ICA v1 REST view: ill-formed path ids and query strings are the client's mistake (400)."""

import re
import uuid

from django.urls import register_converter
from rest_framework.views import APIView

from core.errors import InvalidRequest
from core.serializers import validated


class AnyIdConverter:
    """Matches any path segment, so a malformed id reaches the view and is refused as 400 rather than 404.

    Registered as `ica_uuid` on import; every API module imports this one before its urls use it.
    """

    regex = "[^/]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value) -> str:
        return str(value)


register_converter(AnyIdConverter, "ica_uuid")


class IcaAPIView(APIView):
    """Path ids arrive as UUIDs (but the path names a view lists in `name_kwargs`: a tool's name, say); the query
    string holds only what `query_serializer` declares, once each.

    The validated query is `self.query`. Checks run after authentication, so an anonymous caller gets 401.
    """

    query_serializer = None
    name_kwargs: tuple[str, ...] = ()

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # DRF passes this very dict on to the handler, so the handler receives the parsed ids.
        for name, value in self.kwargs.items():
            if name not in self.name_kwargs:
                self.kwargs[name] = parse_path_id(name, value)
        self.query = self._validated_query(request.query_params)

    def _validated_query(self, params) -> dict:
        repeated = sorted(name for name, values in params.lists() if len(values) > 1)
        if repeated:
            raise InvalidRequest(f"{repeated[0]}: is given more than once.")
        if self.query_serializer is None:
            if params:
                raise InvalidRequest(f"{sorted(params)[0]}: Unknown query parameter.")
            return {}
        return validated(self.query_serializer, params.dict()).validated_data


# The canonical spelling only: Python's UUID() also takes braces, "urn:uuid:" and undashed hex.
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def parse_path_id(name: str, value) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if not _UUID.match(value):
        raise InvalidRequest(f"{name}: must be a UUID.")
    return uuid.UUID(value)
