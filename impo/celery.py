import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "impo.settings")

app = Celery("impo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
