import importlib.util
import sqlite3

from agentic_rag import KnowledgeBase, load_documents
from helpers import EXAMPLE_DATA


def _rows(path):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in ("orders", "inventory")}


def test_committed_database_matches_its_csv(tmp_path):
    spec = importlib.util.spec_from_file_location("build_db", EXAMPLE_DATA / "db" / "build_db.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rebuilt = module.build(tmp_path / "shop.sqlite")
    assert _rows(rebuilt) == _rows(EXAMPLE_DATA / "db" / "shop.sqlite")
    assert ("DK-200", "USB-C 扩展坞 (USB-C dock)", "深圳", 3, 3) in _rows(rebuilt)["inventory"]


def test_example_corpus_loads_cleanly_and_answers_the_reference_searches():
    loaded = load_documents(EXAMPLE_DATA)
    assert loaded.skipped == [] and 20 <= len(loaded.documents) <= 60
    kb = KnowledgeBase()
    kb.add_documents(loaded.documents)
    versioned = [h.doc_id for h in kb.search("登录报错的问题在 2.3.1 版本里修复了吗？", k=5)]
    assert "release-notes/nimbus-2.3.1.md" in versioned
    unversioned = [h.doc_id for h in kb.search("登录报错的问题修复了吗？", k=5)]
    assert {"NT-1042", "NT-1080"} & set(unversioned)
    contracts = {h.doc_id for h in kb.search("合同A和合同B的违约责任有什么区别", k=3)}
    assert {"contracts/contract-a.md", "contracts/contract-b.md"} <= contracts
    assert kb.search("仓库截单时间 工作日 节假日", k=1)[0].doc_id == "warehouse/shipping-rules.md"
