import pytest

from tests.attachments.s3 import BUCKET, MotoStore


@pytest.fixture(autouse=True)
def attachment_store(settings, tmp_path):
    """The local store, in a directory of this test's own."""
    location = tmp_path / "attachments"
    settings.STORAGES = {
        **settings.STORAGES,
        "attachments": {
            **settings.STORAGES["attachments"],
            "OPTIONS": {"location": str(location), "allow_overwrite": True},
        },
    }
    return location


@pytest.fixture
def s3_store(settings, tmp_path):
    """moto's S3 server as the attachments' store, with its bucket; the test may stop and start it again."""
    store = MotoStore(tmp_path / "moto-recording.jsonl")
    store.start()
    store.client().create_bucket(Bucket=BUCKET)
    settings.STORAGES = {**settings.STORAGES, "attachments": store.storage_setting()}
    yield store
    store.stop()
