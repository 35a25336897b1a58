from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "tools"
    verbose_name = "Tools: registry, calls, receipts, devices"

    def ready(self):
        from tools import definitions  # noqa: F401  (registers the built-in tools)
