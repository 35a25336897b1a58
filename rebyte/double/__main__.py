"""`python -m rebyte.double --port 8765 [--host 127.0.0.1]`: a Rebyte Agents API double, state in memory."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from rebyte.double.resources import Config
from rebyte.double.server import build_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rebyte.double", description="Rebyte Agents API double")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port (printed on startup)")
    parser.add_argument("--delta-delay-ms", type=int, default=Config.delta_delay_ms, help="pause before each delta")
    parser.add_argument("--delta-chunks", type=int, default=Config.delta_chunks, help="deltas per reply")
    parser.add_argument("--listing-lag-ms", type=int, default=Config.listing_lag_ms, help="new sessions list late")
    parser.add_argument("--keepalive-seconds", type=float, default=15.0, help="SSE comment interval when idle")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s")
    server = build_server(
        args.host,
        args.port,
        config=Config(
            delta_delay_ms=args.delta_delay_ms, delta_chunks=args.delta_chunks, listing_lag_ms=args.listing_lag_ms
        ),
        keepalive_seconds=args.keepalive_seconds,
    )
    # SIGTERM (what process managers and test fixtures send) should close the socket like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    host, port = server.server_address[:2]
    print(f"rebyte double listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
