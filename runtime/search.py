"""Full-text search over chats' titles and messages' text (PostgreSQL, the `simple` configuration: words as typed,
in any language). The GIN indexes in `runtime.models` are built on these very expressions, so a search uses them."""

import re

from django.contrib.postgres.search import SearchQuery, SearchVector

SEARCH_CONFIG = "simple"
SEARCH_WORDS_MAX = 8


def title_vector():
    return SearchVector("title", config=SEARCH_CONFIG)


def message_text_vector():
    return SearchVector("text", config=SEARCH_CONFIG)


def search_query(query: str) -> SearchQuery | None:
    """`to_tsquery` from the query's words only (never its operators), each a prefix, all required."""
    words = re.findall(r"\w+", query.lower())[:SEARCH_WORDS_MAX]
    if not words:
        return None
    return SearchQuery(" & ".join(f"{word}:*" for word in words), config=SEARCH_CONFIG, search_type="raw")
