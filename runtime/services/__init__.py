"""Write paths of the runtime, one module per concern; each entry point is one durable transaction.

Callers import from the module that owns a function. None of these modules imports `rebyte`: what drives a run
against the provider is `runtime.execution.driver`.
"""
