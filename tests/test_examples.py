"""Every example in examples/ runs, offline, top to bottom, and shows what it is there to show."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from agentic_rag import load_documents
from helpers import EXAMPLE_DATA, ROOT

EXAMPLES = ROOT / "examples"


def run(name: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_example_has_a_test_of_its_own():
    tested = {name[len("test_"):].replace("_py", ".py") for name in globals() if name.endswith("_py")}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def _answers(out: str) -> dict[str, str]:
    """The quickstart's output, question -> the lines printed for it."""
    return {block.split("\n", 1)[0]: block for block in out.split("\nQ: ")[1:]}


def test_quickstart_py():
    out = run("quickstart.py")
    documents = load_documents(EXAMPLE_DATA).documents
    assert out.startswith(f"indexed {len(documents)} documents as ")
    versions, contracts, order, android = _answers(out).values()
    assert "认证失败" in versions and "release-notes/nimbus-2.3.1.md" in versions   # v2.3.1 and 认证 found
    assert "stop: sufficient" in versions
    assert "decompose:2" in contracts and "contract-a.md" in contracts and "contract-b.md" in contracts
    assert "route:tool(order_status)" in order and "status processing [1]" in order
    assert "[1] tool:order_status" in order
    assert "does not hold" in android and "   [1]" not in android                 # abstains, cites nothing


def test_custom_tool_py():
    answer, cited, trace = run("custom_tool.py").splitlines()
    assert answer == "15 USD = 108.00 CNY (at 7.2 CNY per USD) [1]"                 # the function's own result
    assert cited == """cited as: [('tool', 'tool:convert({"amount": 15.0})')]"""   # with the arguments it found
    assert trace.startswith("route:tool(convert) -> tool:convert -> generate")


def test_service_py():
    answered, refused = run("service.py").splitlines()
    status, stop, sources = answered.split(" ", 2)
    assert status == "200" and stop == "sufficient" and "release-notes/nimbus-2.3.1.md" in sources
    assert refused == "400 the question is empty"                                   # bad input: a clear 400


def test_test_a_step_py():
    assert run("test_a_step.py") == "both step tests pass\n"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(EXAMPLES / "test_a_step.py")], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout


CORPUS = [
    {"id": "c1", "title": "Lighthouse", "text": "The Harbor Lighthouse was built in 1871 by the engineer Mara Olsen."},
    {"id": "c2", "title": "Ferry", "text": "The island ferry leaves the harbor every two hours and carries 40 cars."},
    {"id": "c3", "title": "Market", "text": "The fish market opens at 5 am on weekdays and closes at noon."},
    {"id": "c4", "title": "Museum", "text": "The maritime museum shows ship models and old sea charts."},
]
QUESTIONS = [
    {"id": "q1", "question": "In which year was the Harbor Lighthouse built?", "answers": [["1871"]],
     "relevant_ids": ["c1"], "answerable": True, "kind": "single"},
    {"id": "q2", "question": "How many cars does the island ferry carry?", "answers": [["40"]],
     "relevant_ids": ["c2"], "answerable": True, "kind": "single"},
    {"id": "q3", "question": "Who is the mayor of the harbor town?", "answers": [], "relevant_ids": [],
     "answerable": False, "kind": "unanswerable"},
]


def _metrics(out: str) -> dict[str, dict[str, float]]:
    """The benchmark's lines, mode -> metric -> value."""
    found = {}
    for mode, rest in re.findall(r"^(linear|agentic)\s+(.*)$", out, re.M):
        found[mode] = {name: float(value) for name, value in re.findall(r"([a-z][a-z ]*?) ([\d.]+)", rest)}
    return found


def test_benchmark_py(tmp_path):
    for name, rows in (("corpus.jsonl", CORPUS), ("questions.jsonl", QUESTIONS)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = run("benchmark.py", str(tmp_path))
    report = Path(re.search(r"^report: (.+)$", out, re.M).group(1))
    try:
        assert "| linear |" in report.read_text() and "| agentic |" in report.read_text()
    finally:
        shutil.rmtree(report.parent)
    linear, agentic = _metrics(out)["linear"], _metrics(out)["agentic"]
    assert linear["accuracy"] == agentic["accuracy"] == 1.0                       # both answer what the set holds
    assert linear["evidence recall"] == agentic["evidence recall"] == 1.0
    assert linear["abstain recall"] == 0.0 and agentic["abstain recall"] == 1.0   # only the loop refuses ...
    assert linear["model calls"] == 1.0 and agentic["model calls"] <= 1.2        # ... at about linear's price
    missing = run("benchmark.py", str(tmp_path / "nowhere"))
    assert missing.startswith(f"no evaluation set at {tmp_path / 'nowhere'}")


def test_mcp_tools_py():
    out = run("mcp_tools.py")
    umbrella, kayak = out.split("\nQ: ")[1:]
    assert out.startswith("tools: warehouse_stock (Units of an item in stock at the Berlin warehouse")
    assert "holds 41 units of umbrella today. [1]" in umbrella and "[1] mcp:warehouse/warehouse_stock(" in umbrella
    assert "tool:warehouse_stock:error -> route:vector" in kayak and "does not hold a reliable answer" in kayak
