"""SQL safety, dates, web search and tool selection; the shipping and stock questions end to end, offline."""
import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentic_rag import ConfigurationError, OfflineModel, ScriptedModel, ToolError, format_trace, run_agentic_rag
from agentic_rag.tools import (
    SQLDatabase,
    ToolRegistry,
    _sql,
    date_tools,
    shop_tools,
    sql_tool,
    tool_from_function,
    web_search_tool,
)
from agentic_rag.tools._dates import add_business_days, earliest_ship_date, holidays_in
from helpers import EXAMPLE_DATA


@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "shop.sqlite"
    shutil.copy(EXAMPLE_DATA / "db" / "shop.sqlite", path)
    return path


@pytest.mark.parametrize("sql", [
    "INSERT INTO orders (order_id) VALUES ('X1')",
    "UPDATE inventory SET on_hand = 0",
    "DELETE FROM orders",
    "DROP TABLE orders",
    "CREATE TABLE t (x)",
    "ATTACH DATABASE ':memory:' AS other",
    "PRAGMA writable_schema = 1",
    "SELECT * FROM orders; DELETE FROM orders",
    "SELECT 1; SELECT 2",
])
def test_every_unsafe_statement_is_refused_and_the_file_is_unchanged(db_path, sql):
    before = hashlib.sha256(db_path.read_bytes()).hexdigest()
    with pytest.raises(ToolError, match="refused or failed"):
        SQLDatabase(db_path).query(sql)
    assert hashlib.sha256(db_path.read_bytes()).hexdigest() == before


def test_reads_row_limit_injection_and_time_limit(db_path):
    db = SQLDatabase(db_path, row_limit=3)
    assert len(db.query("SELECT * FROM orders")) == 3
    assert db.query("SELECT status FROM orders WHERE order_id = ?", ("A1002' OR '1'='1",)) == []
    tools = ToolRegistry(shop_tools(db_path))
    with pytest.raises(ToolError, match="no order"):
        tools.call("order_status", {"order_id": "A1002' OR '1'='1"})
    slow = SQLDatabase(db_path, time_limit_s=0.05)
    with pytest.raises(ToolError, match="time limit"):
        slow.query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
    assert "CREATE TABLE orders" in db.schema()


@pytest.mark.parametrize("sql", ["SELECT randomblob(1000000000)", "SELECT length(ZeroBlob(1000000000))",
                                 "SELECT hex(randomblob(8)) FROM orders",
                                 "SELECT length(printf('%.*c', 900000000, 'x'))",
                                 "SELECT format('%.*c', 2000000000, 'x')"])
def test_blob_makers_are_refused_not_run_until_the_time_limit(db_path, sql):
    before = hashlib.sha256(db_path.read_bytes()).hexdigest()
    with pytest.raises(ToolError, match="query refused or failed: not authorized to use function"):
        SQLDatabase(db_path, time_limit_s=60).query(sql)
    assert hashlib.sha256(db_path.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("sql", ["SELECT hex(fts3_tokenizer('simple'))",            # a native address
                                 "SELECT fts3_tokenizer('mine', x'4141414141414141')",  # a pointer installed
                                 "SELECT hex(FTS3_TOKENIZER('porter'))",
                                 "SELECT rtreenode(2, x'00')", "SELECT load_extension('/tmp/x.so')"])
def test_native_pointers_and_native_code_are_refused(db_path, sql):
    with pytest.raises(ToolError, match="query refused or failed: not authorized"):
        SQLDatabase(db_path).query(sql)


# each row's text is 85 bytes longer than the last: sorted, the rows sum to gigabytes in seconds
HUGE_SORT = ("WITH RECURSIVE c(i, s) AS (SELECT 1, 'x' UNION ALL SELECT i + 1, s || '" + "y" * 85 + "' FROM c) "
             "SELECT i FROM c ORDER BY s DESC")


def _temporary_bytes() -> int:
    """Bytes in the temporary files (SQLite names them etilqs_*) this process holds open."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if "etilqs_" in os.readlink(f"/proc/self/fd/{fd}"):
                total += os.fstat(int(fd)).st_size
    return total


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="open files are counted through /proc")
def test_a_huge_sort_stops_at_the_memory_limit_and_writes_no_temporary_file(db_path):
    if _sql._heap_meter() is None:
        pytest.skip("this SQLite library does not count its heap")
    peak, done = [0], threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], _temporary_bytes())
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:   # the time limit is far off: only the memory limit can stop it
        with pytest.raises(ToolError, match="query refused or failed: needed more than the memory limit"):
            SQLDatabase(db_path, time_limit_s=120, memory_limit_mb=16).query(HUGE_SORT)
    finally:
        done.set()
        watcher.join()
    assert peak[0] == 0   # on disk (before: temp_store as compiled) it wrote 800 MB in 2 s
    assert len(SQLDatabase(db_path).query("SELECT * FROM orders ORDER BY order_id DESC")) > 1
    with pytest.raises(ConfigurationError, match="memory_limit_mb = 0"):
        SQLDatabase(db_path, memory_limit_mb=0)


@pytest.mark.skipif(not hasattr(sqlite3.Connection, "setlimit"), reason="Connection.setlimit needs Python 3.11+")
def test_a_string_doubled_past_the_length_cap_is_refused(db_path):
    # 2 * 2**22 bytes = 8 MB: sqlite's own 1 GB cap would let it through
    doubling = ("WITH RECURSIVE s(x, n) AS (SELECT 'ab', 0 UNION ALL SELECT x || x, n + 1 FROM s WHERE n < 22) "
                "SELECT length(x) FROM s ORDER BY n DESC LIMIT 1")
    before = hashlib.sha256(db_path.read_bytes()).hexdigest()
    with pytest.raises(ToolError, match="query refused or failed: string or blob too big"):
        SQLDatabase(db_path, time_limit_s=60).query(doubling)
    small = doubling.replace("n < 22", "n < 10")  # 2 KB: well under the cap
    assert SQLDatabase(db_path).query(small) == [{"length(x)": 2048}]
    assert SQLDatabase(db_path).query("SELECT upper(sku) AS s, length(sku) AS n FROM inventory LIMIT 1")[0]["n"] > 0
    assert hashlib.sha256(db_path.read_bytes()).hexdigest() == before


def test_sql_tool_for_a_language_model(db_path):
    tool = sql_tool(SQLDatabase(db_path))
    assert "CREATE TABLE inventory" in tool.description and tool.kind == "database"
    registry = ToolRegistry([tool])
    assert "on_hand 3" in registry.call("sql", {"query": "SELECT on_hand FROM inventory WHERE sku = 'DK-200'"})
    with pytest.raises(ToolError, match="refused"):
        registry.call("sql", {"query": "DELETE FROM inventory"})
    with pytest.raises(ToolError, match="bad arguments for sql"):
        registry.call("sql", {"sql": "SELECT 1"})


def test_tools_from_plain_functions():
    def convert(amount: float, rate: float = 7.2) -> str:
        """Convert USD to CNY at a rate.

        More text that is not the description."""
        return f"{amount * rate:.2f} CNY"

    tool = tool_from_function(convert, patterns=(r"convert",))
    assert tool.description == "Convert USD to CNY at a rate."
    assert set(tool.parameters.model_fields) == {"amount", "rate"}
    registry = ToolRegistry([tool])
    assert registry.call("convert", {"amount": "10"}) == "72.00 CNY"
    with pytest.raises(ToolError, match="bad arguments for convert"):
        registry.call("convert", {"amount": "ten"})


def test_dates():
    assert holidays_in("国庆节：2026-10-01 至 2026-10-03，另 2026-12-31") == ["2026-10-01", "2026-10-02", "2026-10-03",
                                                                           "2026-12-31"]
    assert add_business_days("2026-12-24", 2, ["2026-12-28"]) == "2026-12-29"   # Fri 25, (weekend), (28), Tue 29
    assert "2026-11-30（周一" in earliest_ship_date("2026-11-30T14:59", "15:00")
    assert "2026-12-01（周二" in earliest_ship_date("2026-11-30T15:00", "15:00")
    golden_week = holidays_in("2026-10-01 至 2026-10-07")
    assert "2026-10-08（周四" in earliest_ship_date("2026-09-30T16:00", "15:00", golden_week)
    with pytest.raises(ToolError, match="not ISO"):
        earliest_ship_date("tomorrow")
    today = ToolRegistry(date_tools(lambda: datetime(2026, 11, 30, 9, 0))).call("today", {})
    assert "2026-11-30" in today and "Monday" in today


def test_ship_date_arguments_come_from_evidence():
    tool = {t.name: t for t in date_tools(lambda: datetime(2026, 11, 30, 16, 0))}["earliest_ship_date"]
    question = "如果我今天下单，按仓库的发货规则最早什么时候能发出？"
    assert tool.matches(question) and tool.arguments(question, []) is None
    evidence = [{"text": "截单时间：工作日 15:00 之前确认付款的订单当天发货。"},
                {"text": "节假日安排：2026-12-01 至 2026-12-02 不发货。"}]
    assert tool.arguments(question, evidence) == {"now": "2026-11-30T16:00", "cutoff": "15:00",
                                                  "holidays": ["2026-12-01", "2026-12-02"]}


def test_shipping_question_end_to_end_offline(example_kb, example_tools):
    tools = [t for t in example_tools] + date_tools(lambda: datetime(2026, 9, 30, 16, 0))
    state = run_agentic_rag("如果我今天下单，按仓库的发货规则最早什么时候能发出？", example_kb, OfflineModel(), tools)
    trace = format_trace(state)
    assert trace.startswith("route:vector -> search:warehouse/shipping-rules.md")
    assert "route:tool(earliest_ship_date) -> tool:earliest_ship_date" in trace
    assert "2026-10-08" in state["answer"]                        # after the 1-7 October holidays
    assert {c["doc_id"] for c in state["citations"]} == {"tool:earliest_ship_date", "warehouse/shipping-rules.md"}


def test_stock_question_end_to_end_offline(example_kb, example_tools):
    state = run_agentic_rag("Is DK-200 in stock?", example_kb, OfflineModel(), example_tools)
    assert state["route"]["tool"] == "stock" and "0 available to order" in state["answer"]
    assert state["citations"][0]["kind"] == "database"


def test_a_scripted_model_chooses_a_tool_with_arguments(example_kb, example_tools, db_path):
    model = ScriptedModel({"route": [{"route": "tool", "tool": "sql", "arguments": {
        "query": "SELECT sku, on_hand - reserved AS available FROM inventory ORDER BY available DESC LIMIT 1"}}]},
        default={"generate": {"answer": "CB-500 has the most available stock. [1]"},
                 "judge": {"score": 1.0, "complete": True}})
    tools = [sql_tool(SQLDatabase(db_path))]
    question = "Which product that the warehouse which ships the most has is the most available?"
    state = run_agentic_rag(question, example_kb, model, tools)
    assert state["route"]["tool"] == "sql" and "sku CB-500, available 760" in state["evidence"][0]["text"]
    assert state["citations"][0]["kind"] == "database"


class _Search(BaseHTTPRequestHandler):
    delay = 0.0

    def log_message(self, *args):
        pass

    def do_GET(self):
        time.sleep(self.delay)
        body = json.dumps({"results": [
            {"url": "https://news.example/nimbus-2-4", "title": "Nimbus 2.4 beta",
             "content": "Nimbus 2.4 beta adds whiteboards."},
            {"url": "https://blog.example/review", "title": "Review", "content": "A review of Nimbus Notes."},
            {"title": "no url"}]}).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)
        except BrokenPipeError:  # a client that timed out has gone: what the slow-search test wants
            pass


@pytest.fixture
def search_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Search)
    # shutdown() waits for the loop to look up once a poll interval: 0.05 s, not the default 0.5 s
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/search"
    server.shutdown()
    server.server_close()


def test_web_search_results_are_cited_by_url_and_title(search_url, example_kb):
    tool = web_search_tool(search_url, limit=2)
    state = run_agentic_rag("What is the latest news about Nimbus 2.4?", example_kb, OfflineModel(), [tool])
    assert state["route"]["tool"] == "web_search"
    web = [c for c in state["citations"] if c["kind"] == "web"]
    assert web and web[0]["source"] == "https://news.example/nimbus-2-4" and web[0]["title"] == "Nimbus 2.4 beta"
    assert len([e for e in state["evidence"] if e["kind"] == "web"]) == 2


def test_slow_or_failing_search_is_a_recorded_tool_error(search_url, example_kb, monkeypatch):
    monkeypatch.setattr(_Search, "delay", 1.0)
    state = run_agentic_rag("What is the latest news about Nimbus 2.4?", example_kb, OfflineModel(),
                            [web_search_tool(search_url, timeout=0.2)])
    assert "web search at" in state["rounds"][0]["error"] and state["phase"] == "done"
    down = run_agentic_rag("What is the latest news about Nimbus 2.4?", example_kb, OfflineModel(),
                           [web_search_tool("http://127.0.0.1:9/search", timeout=0.5)])
    assert "failed" in down["rounds"][0]["error"]


def test_a_low_grade_reroutes_to_the_web_when_a_search_tool_is_configured(search_url, tiny_kb):
    from agentic_rag import Config
    from test_loop import scripted

    model = scripted(grade=[{"score": 0.4, "sufficient": False, "missing": ["whiteboards"]}] * 3)  # the web has it
    state = run_agentic_rag("When do orders paid on weekends ship?", tiny_kb, model, [web_search_tool(search_url)],
                            config=Config(sources=("vector", "web"), max_rounds=2))
    assert [r["source"] for r in state["rounds"]] == ["vector", "web"]
    assert "route:vector@web -> web:2 results" in format_trace(state)
    assert any(e["kind"] == "web" and e["source"] == "https://news.example/nimbus-2-4" for e in state["evidence"])


@pytest.mark.parametrize("content, why", [(b"", "holds no tables"), (b"not a database at all\n" * 50, "not a SQLite")])
def test_a_database_that_is_empty_or_not_sqlite_is_refused_at_once_by_path(tmp_path, content, why):
    path = tmp_path / "shop.sqlite"
    path.write_bytes(content)
    with pytest.raises(Exception) as error:
        SQLDatabase(path)
    assert error.type.__name__ == "ConfigurationError" and why in str(error.value) and str(path) in str(error.value)
    assert "\n" not in str(error.value) and path.read_bytes() == content


def test_without_a_length_cap_recursion_is_refused(db_path, monkeypatch):
    from agentic_rag.tools import _sql

    monkeypatch.setattr(_sql, "_CAPPED", False)  # as on Python 3.10, which has no Connection.setlimit
    doubling = ("WITH RECURSIVE s(x, n) AS (SELECT 'ab', 0 UNION ALL SELECT x || x, n + 1 FROM s WHERE n < 30) "
                "SELECT length(x) FROM s ORDER BY n DESC LIMIT 1")
    with pytest.raises(ToolError, match="not authorized"):
        SQLDatabase(db_path, time_limit_s=60).query(doubling)
    assert SQLDatabase(db_path).query("SELECT count(*) AS n FROM orders")[0]["n"] > 0
