"""The parity benchmark: its agreement measure, which set folders it runs, and one run against a real
PostgreSQL (the session's pgserver) on small sets written here."""
import json

from agentic_rag.eval import postgres_parity
from agentic_rag.eval.postgres_parity import TARGET, agreement, dev_sets, markdown
from helpers import TINY


def test_agreement_is_shared_hits_over_the_longer_list_and_exact_order():
    assert agreement(["a", "b"], ["b", "a"]) == (1.0, 0.0)     # the same hits, another order
    assert agreement(["a", "b", "c"], ["a"]) == (1 / 3, 0.0)   # one list shorter: over the longer
    assert agreement(["a"], ["a"]) == (1.0, 1.0)
    assert agreement([], []) == (1.0, 1.0)                     # both find nothing: they agree
    assert agreement(["a"], []) == (0.0, 0.0)


def _write_set(folder, documents, questions):
    folder.mkdir()
    if documents is not None:
        (folder / "corpus.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents),
                                             encoding="utf-8")
    (folder / "questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions),
                                            encoding="utf-8")


CORPUS = [{"id": d.id, "title": d.title, "text": d.text} for d in TINY]
ASKED = [{"id": f"q{i}", "question": question, "answers": [], "relevant_ids": relevant, "answerable": bool(relevant)}
         for i, (question, relevant) in enumerate([("Team plan price per member", ["pricing"]),
                                                   ("认证失败 修复 V2_3_1", ["release-2.3.1", "ticket-1"]),
                                                   ("Orders paid after 15:00", ["shipping"]),
                                                   ("What does Nimbus cost on Mars?", [])])]


def test_the_sets_are_the_folders_with_questions_and_a_corpus_or_documents(tmp_path):
    _write_set(tmp_path / "small", CORPUS, ASKED)
    _write_set(tmp_path / "files", None, ASKED[:1])
    (tmp_path / "files" / "docs").mkdir()
    _write_set(tmp_path / "questions-only", None, ASKED)
    (tmp_path / "notes").mkdir()
    assert dev_sets(tmp_path) == ["files", "small"]


def _parity_databases(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as db:
        return db.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'parity_%'").fetchone()[0]


def test_a_run_measures_every_mode_on_every_set_and_half(tmp_path, pg_server):
    data = tmp_path / "data"
    data.mkdir()
    _write_set(data / "small", CORPUS, ASKED)
    _write_set(data / "small_again", CORPUS, ASKED[:2])              # the same corpus
    _write_set(data / "files", None, [{"id": "f1", "question": "Which colour is the Nimbus mascot?"}])
    (data / "files" / "docs").mkdir()
    (data / "files" / "docs" / "mascot.md").write_text("# Mascot\n\nThe Nimbus mascot is a teal cloud.\n")
    out = tmp_path / "report"
    before = _parity_databases(pg_server.get_uri())
    assert postgres_parity.main(["--data", str(data), "--url", pg_server.get_uri(), "--out", str(out)]) == 0
    assert _parity_databases(pg_server.get_uri()) == before + 2        # small_again built nothing of its own
    report = json.loads((out / "report.json").read_text())
    assert report["target"] == {"top10_agreement": TARGET} and list(report["parity"]) == ["files", "small",
                                                                                          "small_again"]
    small = report["parity"]["small"]
    assert (small["documents"], small["chunks"]) == (len(TINY), len(TINY))
    halves = sorted(postgres_parity.half_of(q["id"]) for q in ASKED)
    assert {split: a["questions"] for split, a in small["agreement"].items()} == \
        {"all": 4, **{f"half {h}": halves.count(h) for h in set(halves)}}
    for mode in ("bm25", "vector", "hybrid"):   # the searches are one plan in both backends: the same lists
        assert small["agreement"]["all"][mode] == {"top10": 1.0, "exact": 1.0}, mode
    assert 0 <= small["agreement"]["all"]["graph"]["top10"] <= 1
    assert small["agreement"]["all"]["pagerank"] == {"top10": 1.0, "exact": 1.0}
    assert small["embedded r@5"] == small["postgres r@5"] and small["embedded r@5"] > 0.5
    assert report["parity"]["files"]["embedded r@5"] is None           # no ids name its evidence
    text = (out / "report.md").read_text()
    assert f"Target: top-10 agreement >= {TARGET}" in text and "| small | half" in text


def test_the_report_names_each_set_and_mode_under_the_target():
    perfect = {"top10": 1.0, "exact": 1.0}
    set_report = {"documents": 5, "chunks": 5, "embedded r@5": None,
                  "agreement": {"all": {"questions": 2, "bm25": perfect, "vector": perfect, "hybrid": perfect,
                                        "graph": {"top10": 0.5, "exact": 0.0}, "pagerank": perfect}}}
    text = markdown({"caps": {"documents": 300, "questions": 0}, "parity": {"tiny": set_report}, "speed": {}})
    assert "**Target missed**: tiny graph 0.500." in text and "the first 300 documents" in text
    assert "| tiny | all | 5 | 5 | 2 | 1.000 / 1.000 | 1.000 / 1.000 | 1.000 / 1.000 | 0.500 / 0.000 | " \
           "1.000 / 1.000 |" in text
    set_report["agreement"]["all"]["graph"] = perfect
    assert "**Target met** on every set and mode." in markdown({"caps": {"documents": 0, "questions": 0},
                                                                 "parity": {"tiny": set_report}, "speed": {}})


def test_the_floor_times_a_round_trip_and_an_hnsw_query(tmp_path, pg_server):
    assert postgres_parity.main(["--sets", "none", "--floor", "300", "--queries", "5", "--url", pg_server.get_uri(),
                                 "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    floor = report["floor"]
    assert report["parity"] == {} and floor["rows"] == 300 and floor["dimension"] == 384
    assert 0 < floor["round_trip_p50_ms"] and 0 < floor["hnsw_p50_ms"] <= floor["hnsw_p95_ms"]
    assert "## The floor" in (tmp_path / "report.md").read_text()


def test_the_speed_and_large_parts_measure_both_embedders_and_every_step(tmp_path, pg_server):
    assert postgres_parity.main(["--sets", "none", "--sizes", "100", "--large", "160", "--queries", "3",
                                 "--url", pg_server.get_uri(), "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    speed = report["speed"]["100"]
    assert set(speed) == {"hashing", "dense 384"} and all(set(s) == {"embedded", "postgres"} for s in speed.values())
    for entry in (e for s in speed.values() for e in s.values()):
        assert 0 < entry["bm25_p50_ms"] <= entry["bm25_p95_ms"] and 0 < entry["hybrid_p50_ms"] <= entry["hybrid_p95_ms"]
    large = report["large"]
    assert [s["chunks"] for s in large["steps"]] == [5, 10, 20, 40, 80, 160] and large["stopped"] is None
    assert all(s["database_gb"] > 0 for s in large["steps"]) and large["add_100_s"] > 0
    assert "## PostgreSQL alone" in (tmp_path / "report.md").read_text()


def test_the_large_run_stops_at_its_cap_and_says_why(pg_server):
    report = postgres_parity.large(pg_server.get_uri(), 64, 2, cap_minutes=60, cap_gb=0)
    assert [s["chunks"] for s in report["steps"]] == [2]
    assert report["stopped"].startswith("the database reached") and "(cap 0)" in report["stopped"]
