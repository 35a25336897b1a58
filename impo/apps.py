from django.apps import AppConfig


class ImpoConfig(AppConfig):
    name = "impo"
    verbose_name = "Impo: the project's shared pieces"

    def ready(self):
        # Connected at startup of every process, so a revocation made anywhere (the admin, a shell, a command)
        # reaches the token cache whether or not that process ever authenticated a request. Imported here, the
        # documented place for signal wiring: the module needs the app registry (DRF's token model).
        from core import authentication

        authentication.connect_revocation_signals()
