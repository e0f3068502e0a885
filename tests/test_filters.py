import pytest

from agentic_rag import ConfigurationError
from agentic_rag.kb._filters import check_filters, matches

FIELDS = {"type": "ticket", "date": "2026-03-10", "priority": "3", "doc_id": "NT-1"}


@pytest.mark.parametrize("filters, expected", [
    ({"type": "ticket"}, True),
    ({"type": "manual"}, False),
    ({"type": ["manual", "ticket"]}, True),
    ({"type": ["manual"]}, False),
    ({"date": {"gte": "2026-03-01", "lt": "2026-04-01"}}, True),
    ({"date": {"gt": "2026-03-10"}}, False),
    ({"date": {"lte": "2026-03-10"}}, True),
    ({"priority": {"gte": 2}}, True),        # numbers compare as numbers: "3" >= 2
    ({"priority": {"gte": 10}}, False),      # ... and not as strings ("3" > "10")
    ({"missing": "x"}, False),
    ({"type": "ticket", "doc_id": "NT-2"}, False),
    ({}, True),
])
def test_filter_semantics(filters, expected):
    assert matches(FIELDS, check_filters(filters)) is expected


def test_bad_filters_are_clear_errors():
    with pytest.raises(ConfigurationError, match="unknown range operators"):
        check_filters({"date": {"after": "2026"}})
    with pytest.raises(ConfigurationError, match="must be a dict"):
        check_filters(["type", "ticket"])
