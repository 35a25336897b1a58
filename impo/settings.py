"""Settings come from the environment; the defaults are safe for a local machine only."""

import ipaddress
import ssl
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from core.log_levels import logging_config
from impo.attachment_settings import attachment_settings

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# Secure by default (docs/operations.md "Security"): DEBUG is off unless DJANGO_DEBUG=true asks for it, and it relaxes
# no rule by itself (plain HTTP, internal webhook and push targets, the demo user: each has a setting of its own).
# Only a DEBUG run, which the web server serves on loopback only (impo/web_server.py), gets a throwaway key; anything
# else brings its own, so no key a stranger could read here can forge sessions.
DEBUG = env.bool("DJANGO_DEBUG", default=False)
LOCAL_DEVELOPMENT_SECRET_KEY = "impo-local-development-only"
SECRET_KEY = env("DJANGO_SECRET_KEY", default=LOCAL_DEVELOPMENT_SECRET_KEY if DEBUG else "")
if not DEBUG and SECRET_KEY in ("", LOCAL_DEVELOPMENT_SECRET_KEY):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set to a key of this deployment's own (only DJANGO_DEBUG=true, on a developer's "
        "machine, runs without one)."
    )
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
# Origins (scheme://host[:port]) other than the site's own that may post forms and open session websockets.
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# Served over HTTPS (by the web server itself or behind a TLS-terminating proxy): on unless turned off, DEBUG or not.
# What really serves plain HTTP (on loopback, on a private network: `make run`, the test harness) turns it off.
SERVED_OVER_HTTPS = env.bool("DJANGO_HTTPS", default=True)
SECURE_SSL_REDIRECT = SERVED_OVER_HTTPS
# Load balancers probe over plain HTTP inside the network; a redirect would read as "down".
SECURE_REDIRECT_EXEMPT = [r"^health$", r"^ready$"]
SESSION_COOKIE_SECURE = SERVED_OVER_HTTPS
CSRF_COOKIE_SECURE = SERVED_OVER_HTTPS
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=365 * 24 * 3600 if SERVED_OVER_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=SERVED_OVER_HTTPS)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=SERVED_OVER_HTTPS)
# Behind a proxy that terminates TLS, Django sees plain HTTP; only a proxy that always sets (and never
# forwards a client's) X-Forwarded-Proto may be trusted with it, hence opt-in.
if env.bool("DJANGO_SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Redoc for /api/docs/, served from here: no outside host
    "channels",
    "impo.apps.ImpoConfig",
    "runtime",
    "rebyte",
    "tools",
    "scheduling",
    "webhooks",
    "accounts",
    "attachments",
]

MIDDLEWARE = [
    "core.middleware.RequestIdMiddleware",
    "core.middleware.AllowedHostMiddleware",  # before anything reads the host
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "core.authentication.BearerRequestsSkipCsrfMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "impo.urls"
ASGI_APPLICATION = "impo.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/impo"),
}
if env.bool("DATABASE_POOL", default=False):
    # The web process (impo/asgi.py asks for this) borrows connections from a pool per request: under ASGI a
    # persistent connection belongs to one request's thread and leaks, and a fresh one per request forks a
    # PostgreSQL backend each time. A worker (impo/celery.py asks for this) borrows one per transaction for the
    # hundreds of runs its threads drive, and none while a run waits: the pool bounds the process's connections.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 2,
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=20),
        # How long a borrower queues for a connection before its transaction fails (longer in a worker: impo/celery.py).
        "timeout": env.float("DATABASE_POOL_TIMEOUT_SECONDS", default=10.0),
    }
    # The pool checks each connection as it lends it (core/postgresql/base.py: a statement only when the server has
    # spoken on an idle socket): after a PostgreSQL restart it replaces the dead ones instead of lending them.
    DATABASES["default"]["ENGINE"] = "core.postgresql"
else:
    # Workers and commands keep one connection each; health checks drop ones the server closed.
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# The server binds every statement's parameters and keeps the plan of one run 5 times on a connection: planning a
# turn's short statements cost PostgreSQL more than running them (0.4 ms against 0.1 prepared, bench/RESULTS.md).
DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=5)
DATABASES["default"]["TEST"] = {"NAME": env("DJANGO_TEST_DATABASE", default=None)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Only a deployment that runs collectstatic needs a root; locally WhiteNoise serves from the apps.
STATIC_ROOT = env("DJANGO_STATIC_ROOT", default=None)
# The web server serves no static files itself; WhiteNoise does, straight from the apps (no collectstatic step).
WHITENOISE_USE_FINDERS = True
# Reread on change: on with DEBUG, and under `make run` (which runs with DEBUG off to show the project's pages).
WHITENOISE_AUTOREFRESH = env.bool("IMPO_STATIC_AUTOREFRESH", default=DEBUG)

# A refused CSRF check answers the API's envelope under /api/ and Django's page elsewhere.
CSRF_FAILURE_VIEW = "runtime.http.web.csrf_failure"

# ICA v1 caps JSON bodies at 64 KiB; Django refuses larger bodies before any parser sees them.
DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
# The web port's deadlines and bounds (impo/edge.py, docs/edge.md): a request's headers and its body must arrive in
# time (ICA v1: a body late by 15 s is 408), and one client address holds a bounded number of HTTP connections.
IMPO_WEB_HEADER_SECONDS = env.float("IMPO_WEB_HEADER_SECONDS", default=10.0)
IMPO_WEB_BODY_SECONDS = env.float("IMPO_WEB_BODY_SECONDS", default=15.0)
IMPO_WEB_CONNECTIONS_PER_ADDRESS = env.int("IMPO_WEB_CONNECTIONS_PER_ADDRESS", default=256)

REDIS_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["core.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "core.errors.ica_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "core.openapi.ImpoAutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Impo API (ICA v1)",
    "DESCRIPTION": "Durable agent execution: commands, submissions, history, tasks, devices, schedules.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Request bodies get components of their own (input-only rules stay off the responses). Path ids match any
    # segment, so a malformed one is refused as 400, while the schema says what is valid.
    "COMPONENT_SPLIT_REQUEST": True,
    "PATH_CONVERTER_OVERRIDES": {"ica_uuid": {"type": "string", "format": "uuid"}},
    # Several responses carry a `status`, each from its own set; each set gets its own name.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "runtime.models.RunState",
        "MessageStatusEnum": "runtime.models.MessageStatus",
        "TaskStatusEnum": "runtime.selectors.TASK_STATUSES",
        "InvocationStatusEnum": "tools.serializers.LISTED_INVOCATION_STATUSES",
        "PlanRunStatusEnum": "scheduling.serializers.PLAN_RUN_STATUSES",
        "EventTypeEnum": "runtime.models.EventType",
        "WebhookEventTypeEnum": "webhooks.models.WebhookEventType",
        "ErrorCodeEnum": "core.openapi.HTTP_CODE_CHOICES",
        "NotificationKindEnum": "runtime.models.NotificationKind",
        "AttachmentKindEnum": "attachments.models.AttachmentKind",
        "FeedbackEnum": "runtime.models.Feedback",
        "DecidedApprovalStatusEnum": "tools.serializers.DECIDED_APPROVAL_STATUSES",
        "KindEnum": "runtime.models.ConversationKind",  # its name before attachments had a kind too
    },
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "runtime.realtime.stream_schema.add_submission_stream",
    ],
}

# channels-redis reads a consumer's next message with a blocking BZPOPMIN of up to 5 s, redis-py 8's default socket
# timeout: an idle socket's read timed out first, its consumer died and the page reconnected every few seconds. So
# the layer's connections wait longer than that read, and keepalive lets the kernel notice a dead peer instead.
CHANNEL_LAYER_SOCKET_TIMEOUT_SECONDS = 30.0
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "impo.channel_layer.GroupsChannelLayer",  # channels-redis', sending to many groups at once
        # redis-py 8 caps a pool at 100 connections and fails the 101st instead of waiting; a web process
        # with a thousand sockets joins and leaves groups concurrently (all at once when a network drops).
        "CONFIG": {
            "hosts": [
                {
                    "address": REDIS_URL,
                    "max_connections": 2000,
                    "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT_SECONDS,
                    "socket_connect_timeout": 5.0,
                    "socket_keepalive": True,
                }
            ],
            "capacity": 100,
            "expiry": 60,
            # A socket renews its membership every 15 s (runtime/socket_catch_up.py); a killed process's channels
            # leave their groups after this long instead of filling with pushes nobody reads.
            "group_expiry": env.int("IMPO_CHANNEL_GROUP_EXPIRY_SECONDS", default=60),
        },
    },
}

# Celery is a wake-up, not the queue of record: a task may be lost or delivered twice, the database lease decides
# who executes. Wake-ups are acknowledged on receipt: on the threads pool a run keeps its task for its whole turn,
# and a consumer holding hundreds unacknowledged when Redis drops tries to give them back to the unreachable broker
# and stops consuming for good (kombu). A killed worker's runs are woken again by the sweeper once their lease
# expires; prefetch 1 stops one worker hoarding wake-ups others could serve.
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
# Redis's transport, but a worker survives losing Redis with wake-ups unacknowledged (impo/broker.py). Named, the
# transport no longer comes from the URL's scheme: TLS (`rediss://`) is then asked for here, verifying the server's
# certificate. Another broker (`amqp://`) keeps its own transport.
_BROKER_SCHEME = urlsplit(CELERY_BROKER_URL).scheme
if _BROKER_SCHEME in ("redis", "rediss"):
    CELERY_BROKER_TRANSPORT = "impo.broker:Transport"
if _BROKER_SCHEME == "rediss":
    CELERY_BROKER_USE_SSL = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
CELERY_TASK_ACKS_LATE = False
# Cancels only late-acknowledged tasks when the broker is lost, and no task is: said so, Celery stops warning at
# every broker loss that its default will change.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600)}
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_QUEUE", default="impo")
# Celery's Django fixup closes every database connection before and after each task unless told to reuse them:
# a PostgreSQL backend forked per wake-up (~10 ms before the claim) and the prepared claim lost with it. Workers
# keep their connection as the comment on DATABASES says: `impo.celery` applies Django's own per-request rule
# around each task (CONN_MAX_AGE, a connection left broken, the health check), and the fixup's unconditional
# close comes only once in this many tasks.
CELERY_DB_REUSE_MAX = 1000
# A worker process drives this many runs at once, one thread each (Celery's threads pool): a run spends its turn
# waiting on the provider, a device or a person, holding no database connection while it waits (DATABASE_POOL).
IMPO_WORKER_CONCURRENCY = env.int("IMPO_WORKER_CONCURRENCY", default=500)
CELERY_WORKER_POOL = "threads"
CELERY_WORKER_CONCURRENCY = IMPO_WORKER_CONCURRENCY

# `echo` talks to the bundled Rebyte protocol double; `rebyte` to the real service. Only the address
# and key differ: the same HTTP client and execution path run either way.
IMPO_RUNTIME = env("IMPO_RUNTIME", default="echo")
if IMPO_RUNTIME not in ("echo", "rebyte"):
    raise ImproperlyConfigured("IMPO_RUNTIME must be 'echo' or 'rebyte'")
if IMPO_RUNTIME == "rebyte":
    # No guessing in production: the real service needs a base URL, an organisation key and a model.
    REBYTE_BASE_URL = env("REBYTE_BASE_URL")
    REBYTE_API_KEY = env("REBYTE_API_KEY")
    REBYTE_MODEL = env("REBYTE_MODEL")
else:
    REBYTE_BASE_URL = env("REBYTE_BASE_URL", default="http://127.0.0.1:8765/v1")
    REBYTE_API_KEY = env("REBYTE_API_KEY", default="impo-echo-local")
    REBYTE_MODEL = env("REBYTE_MODEL", default="rebyte-echo")
TEMPORAL_ADDRESS = env("TEMPORAL_ADDRESS", default="127.0.0.1:7233")
TEMPORAL_NAMESPACE = env("TEMPORAL_NAMESPACE", default="default")
TEMPORAL_TASK_QUEUE = env("TEMPORAL_TASK_QUEUE", default="impo-scheduling")
# Scheduling (docs/design.md §7): how often the Temporal worker re-signals plans whose workflow missed a change,
# and how long an API request waits on Temporal after its commit before leaving that to discovery.
IMPO_SCHEDULE_DISCOVERY_INTERVAL_SECONDS = env.float("IMPO_SCHEDULE_DISCOVERY_INTERVAL_SECONDS", default=30.0)
IMPO_SCHEDULE_SIGNAL_TIMEOUT_SECONDS = env.float("IMPO_SCHEDULE_SIGNAL_TIMEOUT_SECONDS", default=2.0)

# What logs at which level, without secrets (docs/operations.md "Logs"); repeated 401s and 429s are written as one
# line per client and route per IMPO_LOG_SUMMARY_SECONDS.
IMPO_LOG_SUMMARY_SECONDS = env.float("IMPO_LOG_SUMMARY_SECONDS", default=60.0)
LOGGING = logging_config(env("LOG_LEVEL", default="INFO"), summary_seconds=IMPO_LOG_SUMMARY_SECONDS)

# Execution: leases fence workers; the sweeper re-wakes what the broker lost.
IMPO_RUN_LEASE_SECONDS = env.float("IMPO_RUN_LEASE_SECONDS", default=30.0)
# A run's live deltas after the first of its turn are projected together at the end of the window they came in.
IMPO_DELTA_WINDOW_SECONDS = env.float("IMPO_DELTA_WINDOW_SECONDS", default=0.1)
IMPO_CLAIMS_IN_FLIGHT = env.int("IMPO_CLAIMS_IN_FLIGHT", default=4)  # per worker process (execution/driver.py)
IMPO_RUN_MAX_ATTEMPTS = env.int("IMPO_RUN_MAX_ATTEMPTS", default=3)
IMPO_SWEEP_INTERVAL_SECONDS = env.float("IMPO_SWEEP_INTERVAL_SECONDS", default=5.0)
# A queued run whose last wake-up is older than this gets another (the first may have been lost).
IMPO_REWAKE_AFTER_SECONDS = env.float("IMPO_REWAKE_AFTER_SECONDS", default=15.0)
# How long a device has to claim and answer a device tool call before its outcome counts as uncertain.
IMPO_DEVICE_TOOL_TIMEOUT_SECONDS = env.float("IMPO_DEVICE_TOOL_TIMEOUT_SECONDS", default=60.0)
# Tool approval (docs/api.md "Tool approval"): how long a call waits for its owner's answer before it is denied
# (`approval_timeout`), and per-tool overrides of the definitions' policies, e.g. `save_note=always,play_sound=never`.
IMPO_TOOL_APPROVAL_TIMEOUT_SECONDS = env.float("IMPO_TOOL_APPROVAL_TIMEOUT_SECONDS", default=15 * 60.0)
IMPO_TOOL_APPROVAL = env.dict("IMPO_TOOL_APPROVAL", default={})
if set(IMPO_TOOL_APPROVAL.values()) - {"never", "always"}:
    raise ImproperlyConfigured("IMPO_TOOL_APPROVAL maps tool names to 'never' or 'always'")

# The event log's retention window (docs/data-lifecycle.md): a run settled longer ago has its `text.delta` events
# compacted (`message.completed` keeps the whole text). One hour: six times the peers' longest replay window.
IMPO_EVENT_RETENTION_SECONDS = env.float("IMPO_EVENT_RETENTION_SECONDS", default=3600.0)
if IMPO_EVENT_RETENTION_SECONDS < 0:
    raise ImproperlyConfigured("IMPO_EVENT_RETENTION_SECONDS must not be negative")

# Main Chat session rotation (docs/design.md §3).
IMPO_SESSION_MAX_IDLE_SECONDS = env.float("IMPO_SESSION_MAX_IDLE_SECONDS", default=6 * 3600.0)
IMPO_SESSION_MAX_TURNS = env.int("IMPO_SESSION_MAX_TURNS", default=8)
IMPO_SESSION_MAX_CONTEXT_TOKENS = env.int("IMPO_SESSION_MAX_CONTEXT_TOKENS", default=12_000)

# Provider recovery (docs/design.md §1.4, §5): how long a listing may lag behind a create before "absent" is believed;
# the backoff cap; how often a followed turn is re-read while its stream is quiet; when an unseen input is resent.
IMPO_REBYTE_LISTING_GRACE_SECONDS = env.float("IMPO_REBYTE_LISTING_GRACE_SECONDS", default=10.0)
IMPO_PROVIDER_BACKOFF_CAP_SECONDS = env.float("IMPO_PROVIDER_BACKOFF_CAP_SECONDS", default=30.0)
IMPO_PROVIDER_POLL_SECONDS = env.float("IMPO_PROVIDER_POLL_SECONDS", default=0.5)
IMPO_TURN_APPEAR_SECONDS = env.float("IMPO_TURN_APPEAR_SECONDS", default=10.0)

REBYTE_TIMEOUT_SECONDS = env.float("REBYTE_TIMEOUT_SECONDS", default=10.0)
# Reasoning summaries new sessions ask for, shown as progress (docs/provider.md): auto, concise, detailed, empty: none.
REBYTE_REASONING_SUMMARY = env("REBYTE_REASONING_SUMMARY", default="auto")
REBYTE_STREAM_TIMEOUT_SECONDS = env.float("REBYTE_STREAM_TIMEOUT_SECONDS", default=60.0)
# Each web process checks its sockets for events whose push was lost, one query per interval (more often without Redis).
IMPO_SOCKET_CATCH_UP_SECONDS = env.float("IMPO_SOCKET_CATCH_UP_SECONDS", default=5.0)
IMPO_SOCKET_POLL_WITHOUT_PUSH_SECONDS = env.float("IMPO_SOCKET_POLL_WITHOUT_PUSH_SECONDS", default=1.0)
# ... and refreshes their slots and subscriber entries (which live 60 and 45 s) and their group memberships
# (IMPO_CHANNEL_GROUP_EXPIRY_SECONDS) this often: each must stay several times shorter than what it keeps alive.
IMPO_SOCKET_PRESENCE_SECONDS = env.float("IMPO_SOCKET_PRESENCE_SECONDS", default=15.0)

# Per-user limits (docs/operations.md "Security"), counted in Redis and shared by every web process. Admission, streams
# and websockets fail open when Redis is down (the active-run cap is counted in PostgreSQL); login fails closed.
IMPO_LIMIT_ADMISSIONS_PER_MINUTE = env.int("IMPO_LIMIT_ADMISSIONS_PER_MINUTE", default=30)
IMPO_LIMIT_ACTIVE_RUNS = env.int("IMPO_LIMIT_ACTIVE_RUNS", default=20)
IMPO_LIMIT_WEBSOCKETS = env.int("IMPO_LIMIT_WEBSOCKETS", default=20)
IMPO_LIMIT_STREAMS = env.int("IMPO_LIMIT_STREAMS", default=20)
IMPO_LIMIT_LOGIN_FAILURES = env.int("IMPO_LIMIT_LOGIN_FAILURES", default=5)
IMPO_LIMIT_LOGIN_WINDOW_SECONDS = env.float("IMPO_LIMIT_LOGIN_WINDOW_SECONDS", default=15 * 60.0)
# Failures from one address whatever the username: several users behind one NAT share it, so it is a higher bound.
IMPO_LIMIT_LOGIN_FAILURES_PER_ADDRESS = env.int("IMPO_LIMIT_LOGIN_FAILURES_PER_ADDRESS", default=30)

# Webhooks (docs/api.md "Webhooks"): how long one attempt may take, the capped exponential backoff (with jitter)
# between attempts, and when a delivery is given up as failed (whichever of attempts or age comes first).
IMPO_WEBHOOK_TIMEOUT_SECONDS = env.float("IMPO_WEBHOOK_TIMEOUT_SECONDS", default=10.0)
IMPO_WEBHOOK_BACKOFF_BASE_SECONDS = env.float("IMPO_WEBHOOK_BACKOFF_BASE_SECONDS", default=5.0)
IMPO_WEBHOOK_BACKOFF_CAP_SECONDS = env.float("IMPO_WEBHOOK_BACKOFF_CAP_SECONDS", default=3600.0)
IMPO_WEBHOOK_MAX_ATTEMPTS = env.int("IMPO_WEBHOOK_MAX_ATTEMPTS", default=20)
IMPO_WEBHOOK_MAX_AGE_SECONDS = env.float("IMPO_WEBHOOK_MAX_AGE_SECONDS", default=3 * 24 * 3600.0)
# The webhooks loop collects new events and re-wakes deliveries whose wake-up was lost, this often.
IMPO_WEBHOOK_POLL_SECONDS = env.float("IMPO_WEBHOOK_POLL_SECONDS", default=1.0)
IMPO_WEBHOOK_REWAKE_AFTER_SECONDS = env.float("IMPO_WEBHOOK_REWAKE_AFTER_SECONDS", default=15.0)
IMPO_WEBHOOK_ENDPOINTS_PER_USER = env.int("IMPO_WEBHOOK_ENDPOINTS_PER_USER", default=10)
# Webhook and push targets (webhooks/targets.py): https only unless this allows plain http; internal addresses
# (loopback, private, link-local, …) are refused unless a network listed here holds them (CIDRs, e.g.
# `127.0.0.1/32` for a receiver on the same machine; none by default).
IMPO_WEBHOOK_ALLOW_HTTP = env.bool("IMPO_WEBHOOK_ALLOW_HTTP", default=False)
IMPO_WEBHOOK_ALLOWED_NETWORKS = [net for net in env.list("IMPO_WEBHOOK_ALLOWED_NETWORKS", default=[]) if net]
for _network in IMPO_WEBHOOK_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network)
    except ValueError as exc:
        raise ImproperlyConfigured(f"IMPO_WEBHOOK_ALLOWED_NETWORKS: {exc}") from exc
# Web Push (docs/notifications.md): the VAPID key (RFC 8292, base64url of the raw P-256 private key; `make run` keeps
# one in var/vapid_private_key) signs every push, and without it push is off; the subject is the operator's contact.
# Attempts use the webhook settings above (timeout, backoff, attempts, age) and the same target rules.
IMPO_VAPID_PRIVATE_KEY = env("IMPO_VAPID_PRIVATE_KEY", default="")
IMPO_VAPID_SUBJECT = env("IMPO_VAPID_SUBJECT", default="mailto:operator@impo.invalid")
# How long a push service keeps a message for a device that is offline (the `TTL` header).
IMPO_PUSH_TTL_SECONDS = env.int("IMPO_PUSH_TTL_SECONDS", default=24 * 3600)
IMPO_PUSH_SUBSCRIPTIONS_PER_USER = env.int("IMPO_PUSH_SUBSCRIPTIONS_PER_USER", default=20)
# Pushes sent at once by the push loop, a thread each (the loop's pass claims and records them in batches).
IMPO_PUSH_SENDERS = env.int("IMPO_PUSH_SENDERS", default=4)
# `/metrics` (docs/operations.md "Traces and metrics"): a bearer token for the scraper (staff may always read it),
# and the window over which claim latency is summarised.
IMPO_METRICS_TOKEN = env("IMPO_METRICS_TOKEN", default="")
IMPO_METRICS_WINDOW_SECONDS = env.float("IMPO_METRICS_WINDOW_SECONDS", default=300.0)

# Attachments (docs/design.md §12): the store and the bounds of an upload, in their own module.
globals().update(attachment_settings(env, BASE_DIR))
