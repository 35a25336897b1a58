import pytest
from drf_spectacular.generators import SchemaGenerator


@pytest.fixture(scope="session")
def schema() -> dict:
    """The API's OpenAPI schema as /api/schema/ serves it, generated once."""
    return SchemaGenerator().get_schema(request=None, public=True)
