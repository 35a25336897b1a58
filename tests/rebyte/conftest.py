import pytest


@pytest.fixture
def sdk(rebyte_double):
    """The openai SDK, strict, against the suite's double (one client a test)."""
    client = rebyte_double.sdk()
    yield client
    client.close()
