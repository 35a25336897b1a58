"""Celery and Channels read settings by name; a misspelled one is silently ignored, so pin them."""

from django.conf import settings

from impo.celery import app


def test_celery_acknowledges_wake_ups_on_receipt_on_a_threads_pool():
    # A run holds its task for its whole turn; unacknowledged ones would be given back to a broker that is down.
    assert app.conf.task_acks_late is False
    assert app.conf.worker_pool == "threads"
    assert app.conf.worker_prefetch_multiplier == 1


def test_celery_uses_the_redis_broker_from_the_settings():
    assert app.conf.broker_url == settings.REDIS_URL
    assert app.conf.task_default_queue == settings.CELERY_TASK_DEFAULT_QUEUE


def test_channels_uses_redis_with_the_capacity_the_gap_check_assumes():
    layer = settings.CHANNEL_LAYERS["default"]
    # channels-redis' layer with a send for several groups at once (impo/channel_layer.py).
    assert layer["BACKEND"] == "impo.channel_layer.GroupsChannelLayer"
    assert layer["CONFIG"]["capacity"] == 100


def test_requests_run_without_atomic_requests_so_services_can_be_durable():
    assert settings.DATABASES["default"].get("ATOMIC_REQUESTS", False) is False


def test_json_bodies_are_capped_at_64_kib():
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 65_536


def test_a_body_late_by_15_seconds_is_a_timeout_as_ica_v1_says():
    assert settings.IMPO_WEB_BODY_SECONDS == 15.0
    assert settings.IMPO_WEB_HEADER_SECONDS == 10.0


def test_the_web_server_speaks_http_through_the_edge_protocol():
    from impo.web_server import ImpoUvicornWorker

    assert ImpoUvicornWorker.CONFIG_KWARGS["http"] == "impo.edge:EdgeHttpProtocol"


def test_the_channel_layer_waits_longer_on_redis_than_its_own_blocking_read():
    from channels_redis.core import RedisChannelLayer

    [host] = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"]
    assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout
    assert host["socket_keepalive"] is True


def test_the_channel_layers_redis_pool_gets_the_socket_timeout():
    from channels.layers import get_channel_layer

    pool = get_channel_layer().create_pool(0)
    assert pool.connection_kwargs["socket_timeout"] == settings.CHANNEL_LAYER_SOCKET_TIMEOUT_SECONDS
    assert pool.connection_kwargs["socket_keepalive"] is True
