"""An in-memory OTLP/HTTP trace receiver: what a collector would get from the processes under test.

It decodes `ExportTraceServiceRequest` protobufs posted to `/v1/traces` (the standard exporter's format) and keeps
every span, with the service name of the process that sent it.
"""

import gzip
import threading
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

_DECOMPRESS = {"gzip": gzip.decompress, "deflate": zlib.decompress}


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict = field(hash=False)
    status_code: int


def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _attributes(key_values) -> dict:
    return {item.key: _value(item.value) for item in key_values}


def _spans_of(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    received = []
    for resource_spans in request.resource_spans:
        service = _attributes(resource_spans.resource.attributes).get("service.name", "")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                received.append(
                    ReceivedSpan(
                        service=service,
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes=_attributes(span.attributes),
                        status_code=span.status.code,
                    )
                )
    return received


class OtlpReceiver:
    def __init__(self):
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                encoding = self.headers.get("Content-Encoding", "")
                if encoding in _DECOMPRESS:
                    body = _DECOMPRESS[encoding](body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver._lock:
                    receiver._spans.extend(_spans_of(request))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
