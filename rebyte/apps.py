from django.apps import AppConfig


class RebyteConfig(AppConfig):
    name = "rebyte"
    verbose_name = "Rebyte provider: agents, sessions, reconciliation"
