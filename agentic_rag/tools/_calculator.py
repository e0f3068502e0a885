"""A safe calculator: arithmetic parsed with ast and evaluated node by node, never eval."""
from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from typing import Any

from ..core import Evidence, ToolError
from ._registry import Tool

_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.USub: operator.neg, ast.UAdd: operator.pos}
_MAX_ABS = 1e15
_PERCENT_OF = re.compile(r"\d+(?:\.\d+)?\s*%\s*(?:of|的)\s*\d+(?:\.\d+)?")
_RUN = re.compile(r"[(\d][\d.,\s%+\-*/×÷^()]*[\d)%]")
_OPERATOR_BETWEEN = re.compile(r"[\d)%]\s*(?:[-+*/×÷^]|\*\*)\s*[(\d]")


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ToolError("exponent too large (at most 64)")
        value = _OPERATORS[type(node.op)](left, right)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        value = _OPERATORS[type(node.op)](_evaluate(node.operand))
    else:
        raise ToolError(f"not plain arithmetic: {ast.dump(node)[:60]}")
    if abs(value) > _MAX_ABS:
        raise ToolError(f"result too large (over {_MAX_ABS:g})")
    return value


def calculate(expression: str) -> str:
    """Evaluate + - * / // % ** and parentheses; 'x% of y' and trailing % are percentages."""
    if not isinstance(expression, str) or len(expression) > 200:
        raise ToolError("expression must be a string of at most 200 characters")
    text = expression.replace("×", "*").replace("÷", "/").replace("^", "**").replace(",", "")
    text = re.sub(r"(\d+(?:\.\d+)?)\s*%\s*(?:of|的)\s*", r"(\1/100)*", text)
    text = re.sub(r"(\d+(?:\.\d+)?)\s*%", r"(\1/100)", text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ToolError(f"cannot parse {expression!r} as arithmetic") from None
    try:
        value = _evaluate(tree.body)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    shown = f"{round(value, 10):g}" if isinstance(value, float) else str(value)
    return f"{expression.strip()} = {shown}"


def _arguments(question: str, evidence: list[Evidence]) -> dict | None:
    """The arithmetic in the question: 'x% of y', or the longest run with an operator between numbers."""
    match = _PERCENT_OF.search(question)
    if match:
        return {"expression": match.group(0)}
    runs = [m.group(0).strip() for m in _RUN.finditer(question) if _OPERATOR_BETWEEN.search(m.group(0))]
    return {"expression": max(runs, key=len)} if runs else None


CALCULATOR = Tool(
    name="calculator", description="arithmetic on numbers: + - * / ** % and parentheses",
    fn=calculate, arguments=_arguments,
    patterns=(r"\d\s*[-+*/×÷^]\s*\d", r"\d\s*%\s*(?:of|的)\s*\d",
              r"(?:计算|等于多少|是多少|calculate|compute|how much is)"))
