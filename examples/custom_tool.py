"""A custom tool: a plain function becomes a tool the agent calls, and its result is cited.

    python examples/custom_tool.py
"""
import re
from pathlib import Path

from agentic_rag import KnowledgeBase, OfflineModel, format_trace, load_documents, run_agentic_rag, tool_from_function


def convert(amount: float, rate: float = 7.2) -> str:
    """Convert US dollars to yuan at a fixed rate."""
    return f"{amount:g} USD = {amount * rate:.2f} CNY (at {rate} CNY per USD)"


def amount_in(question: str, evidence: list) -> dict | None:
    """The tool applies when the question names an amount in dollars."""
    match = re.search(r"(\d+(?:\.\d+)?)\s*(?:USD|dollars?)", question)
    return {"amount": float(match.group(1))} if match else None


kb = KnowledgeBase()
kb.add_documents(load_documents(Path(__file__).parent / "data").documents)
tool = tool_from_function(convert, patterns=(r"\b(?:CNY|yuan|RMB)\b",), arguments=amount_in)

state = run_agentic_rag("What is 15 USD in CNY?", kb, OfflineModel(), [tool])
print(state["answer"])
print("cited as:", [(c["kind"], c["source"]) for c in state["citations"]])
print(format_trace(state))
