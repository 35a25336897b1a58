"""What the tests and the benchmarks both use to drive and check a running stack from outside (a blocking
websocket client, the records a client keeps of what it sent and saw, the invariants checked over them), beside
`devtools/stack.py`, which starts that stack: here rather than in tests/, so bench/ never imports tests/. Nothing
that serves requests imports it."""
