import hashlib
import re
import shutil

import pytest

from agentic_rag import CALCULATOR, ConfigurationError, Tool, ToolError, ToolRegistry, shop_tools
from agentic_rag.tools import calculate
from helpers import EXAMPLE_DATA


@pytest.mark.parametrize("expression, result", [
    ("12*7+3", "12*7+3 = 87"), ("(2+3)**2", "(2+3)**2 = 25"), ("15% of 80", "15% of 80 = 12"),
    ("100 ÷ 8", "100 ÷ 8 = 12.5"), ("-3 + 1,000", "-3 + 1,000 = 997"), ("7 // 2", "7 // 2 = 3"),
])
def test_calculator_arithmetic(expression, result):
    assert calculate(expression) == result


@pytest.mark.parametrize("expression, message", [
    ("__import__('os').system('ls')", "not plain arithmetic"), ("a + 1", "not plain arithmetic"),
    ("2 ** 1000", "exponent too large"), ("10 ** 20", "too large"), ("1/0", "division by zero"),
    ("(1 +", "cannot parse"), ("1" * 300, "at most 200"),
])
def test_calculator_refuses_everything_else(expression, message):
    with pytest.raises(ToolError, match=message):
        calculate(expression)


def test_calculator_finds_the_arithmetic_in_a_question():
    assert CALCULATOR.arguments("What is 15% of 80?", []) == {"expression": "15% of 80"}
    assert CALCULATOR.arguments("12*7+3等于多少？", []) == {"expression": "12*7+3"}
    assert CALCULATOR.arguments("Is DK-200 in stock?", []) is None


@pytest.fixture
def shop_db(tmp_path):
    path = tmp_path / "shop.sqlite"
    shutil.copy(EXAMPLE_DATA / "db" / "shop.sqlite", path)
    return path


def test_shop_lookups_read_the_database_and_leave_it_unchanged(shop_db):
    before = hashlib.sha256(shop_db.read_bytes()).hexdigest()
    tools = ToolRegistry(shop_tools(shop_db))
    assert "status processing" in tools.call("order_status", {"order_id": "a1002"})
    assert "0 available" in tools.call("stock", {"sku": "DK-200"})
    with pytest.raises(ToolError, match="no order 'Z9999'"):
        tools.call("order_status", {"order_id": "Z9999"})
    with pytest.raises(ToolError, match="no product"):
        tools.call("stock", {"sku": "DK-200' OR '1'='1"})   # a parameter, never SQL
    assert hashlib.sha256(shop_db.read_bytes()).hexdigest() == before


def test_shop_tools_select_by_pattern_and_arguments(shop_db):
    tools = ToolRegistry(shop_tools(shop_db))
    tool, arguments = tools.select("订单 A1002 的状态是什么？", [])
    assert tool.name == "order_status" and arguments == {"order_id": "A1002"}
    tool, arguments = tools.select("Is DK-200 in stock?", [])
    assert tool.name == "stock" and arguments == {"sku": "DK-200"}
    assert tools.select("What is an order?", []) is None      # the pattern matches, but no id: not selected
    with pytest.raises(ConfigurationError, match="database not found"):
        shop_tools(shop_db.parent / "missing.sqlite")


def test_registry_errors():
    with pytest.raises(ConfigurationError, match="not a Tool"):
        ToolRegistry([len])
    with pytest.raises(ConfigurationError, match="two tools are named"):
        ToolRegistry([CALCULATOR, CALCULATOR])
    failing = Tool("boom", "always fails", fn=lambda: 1 / 0)
    with pytest.raises(ToolError, match="boom failed: ZeroDivisionError"):
        ToolRegistry([failing]).call("boom", {})
    with pytest.raises(ToolError, match="must be an object"):
        ToolRegistry([failing]).call("boom", ["x"])


def test_a_tools_own_type_error_is_its_failure_and_bad_arguments_are_told_apart():
    def stock(sku: str) -> str:
        return len(sku) + " units"                     # a bug inside the tool
    tools = ToolRegistry([Tool("stock", "stock by SKU", stock)])
    with pytest.raises(ToolError, match="stock failed: TypeError"):
        tools.call("stock", {"sku": "DK-200"})
    with pytest.raises(ToolError, match="bad arguments for stock: missing a required argument: 'sku'"):
        tools.call("stock", {"code": "DK-200"})       # does not bind to the signature: the caller's fault


def test_a_tool_with_a_json_schema_is_checked_by_it_and_describes_it_to_the_router():
    schema = {"type": "object", "properties": {"item": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
              "required": ["item"], "additionalProperties": False}
    tools = ToolRegistry([Tool("stock", "units in stock", lambda **arguments: arguments, schema=schema)])
    assert tools.call("stock", {"item": "lantern", "count": 2}) == {"item": "lantern", "count": 2}
    for arguments, said in (({}, "arguments: 'item' is a required property"),
                            ({"item": "x", "count": 0}, "count: 0 is less than the minimum of 1"),
                            ({"item": "x", "colour": "red"}, "Additional properties are not allowed")):
        with pytest.raises(ToolError, match=f"^bad arguments for stock: .*{re.escape(said)}"):
            tools.call("stock", arguments)
    assert tools.describe() == [f"stock: units in stock arguments: {schema['properties']}"]
    broken = ToolRegistry([Tool("odd", "a schema that is none", lambda: 1, schema={"type": "nothing"})])
    with pytest.raises(ToolError, match="odd's schema is not a JSON schema"):
        broken.call("odd", {})
    nowhere = ToolRegistry([Tool("ref", "a $ref to nothing", lambda **a: 1, schema={"$ref": "#/$defs/none"})])
    with pytest.raises(ToolError, match="ref's schema cannot be checked: "):
        nowhere.call("ref", {"x": 1})


def test_a_failing_argument_finder_is_recorded_and_the_tool_never_selected_again():
    def finder(question, evidence):
        raise ValueError("no SKU here")
    broken = Tool("broken", "fails to find its arguments", lambda: "x", patterns=(r"stock",), arguments=finder)
    odd = Tool("odd", "finds a list", lambda: "x", patterns=(r"stock",), arguments=lambda q, e: ["DK-200"])
    tools = ToolRegistry([broken, odd])
    assert tools.select("Is DK-200 in stock?", []) is None
    assert [name for name, _ in tools.take_failures()] == ["broken", "odd"] and tools.take_failures() == []
    assert "ValueError: no SKU here" in tools.failed["broken"]
    assert tools.select("Is DK-200 in stock?", []) is None and tools.take_failures() == []   # not tried again


def test_a_pattern_that_is_not_a_regex_is_refused_at_registration():
    with pytest.raises(ConfigurationError, match="bad pattern"):
        ToolRegistry([Tool("t", "d", lambda: 1, patterns=("([unclosed",))])
