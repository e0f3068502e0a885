import pytest

from agentic_rag.eval import answer_correct
from agentic_rag.eval._answers import contains


@pytest.mark.parametrize("answer, expected, found", [
    ("He was born in France.", "France", True),
    ("The answer lies with him", "it", False),           # not inside "with"
    ("It is", "it", True),
    ("Version 12.3 fixed it", "2.3", False),              # digits stand on boundaries too
    ("死亡人数为12人。", "12人", True),
    ("ＦＲＡＮＣＥ", "france", True),                       # width and case folded
    ("G. Stanley Hall founded it", "G. Stanley Hall", True),
])
def test_contains(answer, expected, found):
    assert contains(answer, expected) is found


def test_every_part_needs_one_of_its_options():
    assert answer_correct("隋文静和韩聪夺冠", ["隋文静", "韩聪"])
    assert not answer_correct("隋文静夺冠", ["隋文静", "韩聪"])
    assert answer_correct("Apple released the SE3", [["SE 3", "SE3"]])
    assert not answer_correct("anything", [])
