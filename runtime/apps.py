from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "runtime"
    verbose_name = "Runtime: conversations, submissions and runs"

    def ready(self):
        from runtime.services import task_tool  # noqa: F401  (registers create_task with the tools registry)
