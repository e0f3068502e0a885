import pytest

from agentic_rag import ConfigurationError
from agentic_rag.kb.indexes._filters import check_filters, filter_mask, matches

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


@pytest.mark.parametrize("filters, message", [
    ({"doc_id": {"gte": list(range(100_000))}}, "'gte' bound is a list"),         # the bound of a range is one value
    ({"doc_id": {"lt": {"gte": 1}}}, "'lt' bound is a dict"),
    ({"doc_id": [["a", "b"], "c"]}, "a list member is a list"),                   # membership is one level deep
    ({"doc_id": None}, "is a NoneType"),
    ({"doc_id": {"gte": float("nan")}}, "finite number"),
    ({"doc_id": 10 ** 200}, "more than 100 digits"),
    ({"doc_id": "x" * 5_000}, "holds 5,000 characters; the limit is 4,096"),
    ({"x" * 5_000: "a"}, "holds 5,000 characters"),
    ({7: "a"}, "field names are texts"),
    ({"d": {f"op{i}" * 1_000: 1 for i in range(50)}}, r"unknown range operators \['op0op0.{34}', .*\] and more; use"),
    ({f"f{i}": "x" * 1_000 for i in range(101)}, "more than 100,000 characters in all"),
])
def test_a_value_is_one_bounded_scalar(filters, message):
    with pytest.raises(ConfigurationError, match=message):
        check_filters(filters)


@pytest.mark.parametrize("filters, count", [
    ({"doc_id": list(range(1_001))}, 1_001),                                       # list members
    ({f"f{i}": {"gte": 1, "lt": 9} for i in range(501)}, 1_002),                   # range bounds
    ({f"f{i}": [] for i in range(1_001)}, 1_001),                                  # an empty list is a condition
    ({f"f{i}": "a" for i in range(600)} | {"doc_id": list(range(401))}, 1_001),   # all fields together
])
def test_every_value_counts_toward_the_limit(filters, count):
    with pytest.raises(ConfigurationError, match=f"hold {count} values .* the limit is 1000"):
        check_filters(filters)
    assert check_filters({"doc_id": list(range(1_000))})   # at the limit: fine


class _Watched(list):
    """A list that records whether anyone walked it (counting its values must not)."""

    walked = False

    def __iter__(self):
        _Watched.walked = True
        return super().__iter__()


def test_the_limit_is_checked_before_any_value_is_read():
    _Watched.walked = False
    with pytest.raises(ConfigurationError, match="hold 100000 values"):
        check_filters({"doc_id": _Watched(range(100_000))})
    assert not _Watched.walked
    payload = {f"f{i}": {"gte": list(range(100))} for i in range(1_000)}   # 1,000 lists of 100: refused at the first
    with pytest.raises(ConfigurationError, match="'f0'.*bound is a list"):
        check_filters(payload)


class _Counted(str):
    calls = 0

    def __str__(self):
        _Counted.calls += 1
        return str.__str__(self)


def test_a_membership_list_is_read_once_not_once_per_chunk():
    _Counted.calls = 0
    chunks = [{"doc_id": f"d{i}", "source": "s", "title": "t", "metadata": {}} for i in range(300)]
    filters = check_filters({"doc_id": [_Counted(f"d{i}") for i in range(0, 2_000, 2)]})
    mask = filter_mask([*chunks, None], filters)
    assert mask.tolist() == [i % 2 == 0 and i < 2_000 for i in range(300)] + [False]
    assert _Counted.calls == 1_000   # once each, not 300 x 1,000


def test_scalars_of_every_kind_keep_their_meaning():
    fields = {**FIELDS, "flag": True, "score": 2.5}
    assert matches(fields, check_filters({"flag": [True], "score": {"gt": 2, "lte": 2.5}, "doc_id": ("NT-1",)}))
    assert not matches(fields, check_filters({"flag": "true"}))   # a true compares as the text True
    assert matches({"n": 5}, check_filters({"n": {"lt": 10 ** 99}}))
