"""A stand-in for the Rebyte Agents API, for tests and local development: `python -m rebyte.double`.

Pure standard library (no Django), so it runs as its own process. See rebyte/README.md.
"""
