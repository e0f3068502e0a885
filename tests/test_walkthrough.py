"""The walkthrough notebook: outputs cleared, and every code cell runs (a small runner over its JSON)."""
import json
import os

from helpers import ROOT

NOTEBOOK = ROOT / "examples" / "walkthrough.ipynb"


def test_outputs_are_cleared():
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def test_every_code_cell_runs(monkeypatch, capsys):
    monkeypatch.chdir(ROOT / "examples")
    monkeypatch.delenv("AGENTIC_RAG_MODEL", raising=False)   # the real-model cell must skip cleanly
    namespace = {}
    for cell in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), str(NOTEBOOK), "exec"), namespace)
    out = capsys.readouterr().out
    assert "does not hold" in out and "no model configured" in out
    assert namespace["state"]["stop_reason"] == "sufficient" and namespace["refused"]["abstained"]
    assert os.getcwd().endswith("examples")
