"""`agentic-rag bench` on a set of real files: docs/ read with load_documents as a user would, and
questions naming the file (and, for a PDF, the physical page) their answer comes from."""
import json
import shutil

import pytest

from agentic_rag import Config
from agentic_rag.cli import main
from agentic_rag.eval import Question
from agentic_rag.eval._bench import cached_kb, corpus_digest
from agentic_rag.eval._datasets import load_set
from agentic_rag.eval._report import summarize
from agentic_rag.kb.embedders._embedders import HashingEmbedder
from helpers import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "docs"
PDF, HTML = "pdf/shared-mime-info-spec.pdf", "html/shared-mime-info-spec.html"
VERSION = "Which version of the Shared MIME-info Database specification is this document?"
QUESTIONS = [
    # the version is printed on page 1 of the PDF only (the HTML fixture is chapter 2)
    {"id": "v-right", "question": VERSION, "answers": [["0.21"]], "answerable": True, "kind": "number",
     "source": {"file": f"docs/{PDF}", "page": 1, "section": "1.1. Version"}},
    # the same question with a gold page and file that the answer cannot cite: counted wrong
    {"id": "v-wrong-page", "question": VERSION, "answers": [["0.21"]], "answerable": True, "kind": "number",
     "source": {"file": f"docs/{PDF}", "page": 9, "section": "1.1. Version"}},
    {"id": "v-wrong-file", "question": VERSION, "answers": [["0.21"]], "answerable": True, "kind": "number",
     "source": {"file": f"docs/{HTML}", "page": None, "section": "2. Unified system"}},
    {"id": "off", "question": "Which Kubernetes operator renews the TLS certificates of an ingress controller?",
     "answers": [], "answerable": False, "kind": "offkb", "source": None},
]


def make_set(folder):
    (folder / "docs" / "pdf").mkdir(parents=True)
    (folder / "docs" / "html").mkdir()
    shutil.copy(FIXTURES / "shared-mime-info-spec.pdf", folder / "docs" / PDF)
    shutil.copy(FIXTURES / "shared-mime-info-spec.html", folder / "docs" / HTML)
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return folder


@pytest.mark.slow
def test_bench_on_real_files_scores_the_cited_file_and_page(tmp_path, capsys):
    data = make_set(tmp_path / "mime")
    out = tmp_path / "out"
    assert main(["bench", "--data", str(data), "--embedder", "hashing", "--mode", "both", "--out", str(out),
                 "--cache", str(tmp_path / "cache")]) == 0
    assert "| source_page |" in capsys.readouterr().out
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    metrics = json.loads((out / "metrics.json").read_text())
    for mode in ("linear", "agentic"):
        by_id = {r["id"]: r for r in records if r["mode"] == mode}
        right = by_id["v-right"]
        assert [PDF, 1] in right["cited_pages"] and right["citations"] == [d for d, _ in right["cited_pages"]]
        assert all(page is None for d, page in by_id["v-right"]["cited_pages"] if d == HTML)
        m = metrics[mode]
        # cited the PDF (3 questions; one's gold file is the HTML) and page 1 (2 PDF questions; one's gold is page 9)
        assert m["source_file"] == pytest.approx(2 / 3) and m["source_page"] == pytest.approx(1 / 2)
        assert m["r@5"] == pytest.approx(sum(q in by_id[i]["ranking"][:5] for i, q in
                                             (("v-right", PDF), ("v-wrong-page", PDF), ("v-wrong-file", HTML))) / 3)
        assert m["n"] == 4 and m["abstain_recall"] in (0.0, 1.0)


def test_source_metrics_by_hand():
    questions = [Question("a", "q", [["x"]], [PDF], True, "k", {"file": f"docs/{PDF}", "page": 3}),
                 Question("b", "q", [["x"]], [PDF], True, "k", {"file": f"docs/{PDF}", "page": 5}),
                 Question("c", "q", [["x"]], [HTML], True, "k", {"file": f"docs/{HTML}", "page": None}),
                 Question("d", "q", [], [], False, "offkb", None)]
    base = {"mode": "linear", "kind": "k", "stop_reason": "linear", "rounds": 1, "pool_size": 1, "ms": 1.0,
            "faithfulness": None, "usage": {"model_calls": 1, "prompt_tokens": 1, "completion_tokens": 1,
                                            "cost_usd": 0.0}}
    records = [dict(base, id="a", answer="x [1]", abstained=False, ranking=[PDF], evidence=[PDF], citations=[PDF],
                    cited_pages=[[PDF, 3]]),
               dict(base, id="b", answer="x [1]", abstained=False, ranking=[PDF], evidence=[PDF], citations=[PDF],
                    cited_pages=[[PDF, 4]]),          # the right file, the wrong page
               dict(base, id="c", answer="x [1]", abstained=False, ranking=[PDF], evidence=[PDF], citations=[PDF],
                    cited_pages=[[PDF, 3]]),          # the wrong file
               dict(base, id="d", answer="", abstained=True, ranking=[], evidence=[], citations=[], cited_pages=[])]
    m = summarize(records, questions)
    assert m["source_file"] == pytest.approx(2 / 3) and m["source_page"] == pytest.approx(1 / 2)
    assert m["r@5"] == pytest.approx(2 / 3) and m["abstain_recall"] == 1.0


def test_the_cache_key_follows_every_file_and_its_path(tmp_path):
    data = make_set(tmp_path / "mime")
    before = corpus_digest(data)
    (data / "docs" / HTML).rename(data / "docs" / "html" / "renamed.html")
    renamed = corpus_digest(data)
    (data / "docs" / "html" / "renamed.html").write_bytes((FIXTURES / "shared-mime-info-spec.html").read_bytes()
                                                         + b"<p>one more line</p>")
    assert len({before, renamed, corpus_digest(data)}) == 3
    corpus, questions = load_set(data)
    assert {d.id for d in corpus} == {PDF, "html/renamed.html"} and questions[0].relevant_ids == [PDF]


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds."""

    def __init__(self):
        super().__init__()
        self.embedded = 0

    def embed(self, texts):
        self.embedded += len(texts)
        return super().embed(texts)


@pytest.mark.slow
def test_a_changed_file_rebuilds_the_cached_kb_and_re_embeds_only_its_new_chunks(tmp_path):
    data, cache = make_set(tmp_path / "mime"), tmp_path / "cache"
    first = CountingEmbedder()
    chunks = len(cached_kb(data, first, Config(), cache))
    assert first.embedded == chunks > 0
    again = CountingEmbedder()
    cached_kb(data, again, Config(), cache)
    assert again.embedded == 0                                       # unchanged: loaded, not built
    html = data / "docs" / HTML
    html.write_bytes(html.read_bytes().replace(b"</BODY", b"<H2>3. Appendix</H2><P>Zebra quagga okapi.</P></BODY"))
    changed = CountingEmbedder()
    kb = cached_kb(data, changed, Config(), cache)
    assert 1 <= changed.embedded <= 2 and len(list(cache.iterdir())) == 2    # rebuilt, reusing the other vectors
    assert kb.search("zebra quagga okapi", k=1)[0].doc_id == HTML


def test_the_loader_version_follows_the_loaders_source(tmp_path, monkeypatch):
    from agentic_rag.eval import _bench

    copy = tmp_path / "ingestion"
    shutil.copytree(_bench._INGESTION, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _bench.loader_version() == (monkeypatch.setattr(_bench, "_INGESTION", copy) or _bench.loader_version())
    (copy / "_loaders.py").write_text((copy / "_loaders.py").read_text() + "\n# a changed reader\n")
    changed = _bench.loader_version()
    monkeypatch.undo()
    assert changed != _bench.loader_version()
