"""The walkthrough notebook: committed with the outputs of a real run, and run again here in a real
Jupyter kernel (nbclient, ipykernel), whose outputs must be the committed ones."""
import copy
import json

import nbformat
import pytest
from nbclient import NotebookClient

from helpers import ROOT

NOTEBOOK = ROOT / "examples" / "walkthrough.ipynb"


def texts(cell: dict) -> list[str]:
    """What a code cell showed: its printed text as one string (a busy kernel may send it in several
    pieces), then its displayed values; no timings are printed, and stderr (warnings) is not compared."""
    printed = "".join("".join(o["text"]) for o in cell["outputs"]
                      if o["output_type"] == "stream" and o.get("name") == "stdout")
    shown = ["".join(o["data"]["text/plain"]) for o in cell["outputs"] if o["output_type"] == "execute_result"]
    return ([printed] if printed else []) + shown


@pytest.fixture(scope="module")
def committed():
    return nbformat.read(NOTEBOOK, as_version=4)


def test_committed_with_the_outputs_of_a_run(committed):
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert code and all(texts(c) for c in code)
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert not any(o["output_type"] == "error" for c in code for o in c.outputs)


def test_a_kernel_gives_the_committed_outputs(committed, monkeypatch):
    monkeypatch.delenv("AGENTIC_RAG_MODEL", raising=False)  # the real-model cell must skip cleanly
    fresh = copy.deepcopy(committed)
    for cell in fresh.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    NotebookClient(fresh, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    ran = [texts(c) for c in fresh.cells if c.cell_type == "code"]
    assert ran == [texts(c) for c in committed.cells if c.cell_type == "code"]
    shown = "\n".join(json.dumps(t, ensure_ascii=False) for t in ran)
    for expected in ("same trace and answer as by hand: True", "stop: sufficient",
                     "route:vector -> search:release-notes/nimbus-2.3.1.md", "retrieval stopped: low_confidence",
                     "no model configured"):
        assert expected in shown, expected
