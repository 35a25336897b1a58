from rest_framework.authentication import TokenAuthentication


class BearerTokenAuthentication(TokenAuthentication):
    """DRF tokens, presented the way ICA v1 clients send them: `Authorization: Bearer <token>`."""

    keyword = "Bearer"
