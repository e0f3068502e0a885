import json

import pytest

from agentic_rag.eval import cost_chart


def report(folder, linear, agentic):
    folder.mkdir()
    metrics = {mode: {"model_calls": calls, "answer_accuracy": rate, "evidence_recall": rate}
               for mode, (calls, rate) in (("linear", linear), ("agentic", agentic))}
    (folder / "metrics.json").write_text(json.dumps(metrics))


def test_a_panel_per_set_and_a_line_per_half(tmp_path, capsys):
    report(tmp_path / "squad2-half1", (1.0, 0.75), (1.9, 0.70))
    report(tmp_path / "squad2-half2", (1.0, 0.72), (1.5, 0.70))
    report(tmp_path / "musique-h1", (1.0, 0.49), (3.0, 0.56))
    out = tmp_path / "chart.svg"
    assert cost_chart.main([str(p) for p in sorted(tmp_path.glob("*-h*"))] + ["--out", str(out)]) == 0
    svg = out.read_text()
    assert svg.startswith("<svg") and svg.count("<line") == 3 and svg.count("<circle") == 6
    assert ">musique</text>" in svg and ">squad2</text>" in svg and "x, 0 to 3.0" in svg
    assert "squad2 half 2 agentic: 0.700 at 1.50 calls" in svg
    assert "blue --half 1 (settings chosen on it), orange --half 2 (held out)</text>" in svg  # what each split is


def test_a_folder_that_is_not_a_comparison_is_refused(tmp_path):
    report(tmp_path / "squad2", (1.0, 0.75), (1.9, 0.70))
    with pytest.raises(SystemExit, match="named SET-halfN"):
        cost_chart.main([str(tmp_path / "squad2"), "--out", str(tmp_path / "c.svg")])
