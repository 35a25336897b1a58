"""moto's standalone S3 server run as a process (never a patched client), as the attachments' S3-compatible store.

It records every request it serves (moto's recorder) to a file of the test's, so a server stopped and started again
on the same port replays them and holds the same objects: a store that went away for a while and came back, as a
real one does, rather than an empty one."""

import boto3
import httpx

from devtools.stack import VENV_BIN, ServiceProcess, free_port, wait_until

BUCKET = "impo-attachments"
CREDENTIALS = {"access_key": "moto", "secret_key": "moto", "region_name": "us-east-1"}


class MotoStore:
    def __init__(self, recording_path):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._recording_path = recording_path
        self._server: ServiceProcess | None = None

    def start(self) -> None:
        """Serves on the store's port, holding every object it held before (its recorded requests replayed)."""
        self._server = ServiceProcess(
            "moto",
            [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
            env={"MOTO_ENABLE_RECORDING": "1", "MOTO_RECORDER_FILEPATH": str(self._recording_path)},
        )
        wait_until(self._serving, timeout=30, what=f"moto's S3 server (log: {self._server.log_path})")
        if self._recording_path.exists():
            httpx.post(f"{self.endpoint}/moto-api/recorder/replay-recording", timeout=30).raise_for_status()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def _serving(self) -> bool:
        if not self._server.alive:
            raise RuntimeError(f"moto exited: {self._server.log_text()[-2000:]}")
        try:
            return httpx.get(f"{self.endpoint}/moto-api/", timeout=1).status_code < 500
        except httpx.TransportError:
            return False

    def client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["access_key"],
            aws_secret_access_key=CREDENTIALS["secret_key"],
            region_name=CREDENTIALS["region_name"],
        )

    def keys(self) -> list[str]:
        return sorted(entry["Key"] for entry in self.client().list_objects_v2(Bucket=BUCKET).get("Contents", []))

    def storage_setting(self) -> dict:
        """`STORAGES["attachments"]` pointing at this store."""
        return {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": self.endpoint,
                "signature_version": "s3v4",
                "file_overwrite": True,
                **CREDENTIALS,
            },
        }
