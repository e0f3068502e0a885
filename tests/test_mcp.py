"""The Model Context Protocol both ways, with real processes and the MCP SDK's own client: the
knowledge base and the agent as an MCP server (agentic-rag mcp over stdio; serve's /mcp and
/mcp/{collection} over HTTP with scoped keys), and the tools of a real MCP server in the loop,
with servers that answer, fail, die, hang and send garbage."""
import json
import sys

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentic_rag import OfflineModel, format_trace, run_agentic_rag
from agentic_rag.kb import Document
from agentic_rag.mcp import McpServer, mcp_tools
from agentic_rag.service._keys import digest, write_keys_file
from helpers import ROOT, run, start_service, stop_service
from openai_server import FakeOpenAI

QUESTION = "登录报错的问题在 2.3.1 版本里修复了吗？"
ACME, OPERATOR = "acme-key-" + "a" * 16, "operator-" + "o" * 16
DOCS = [Document("acme-plan", "The Zephyr launch code of Acme is 7731. Acme ships rockets on Tuesdays.",
                 title="Acme plan", metadata={"tenant": "acme"}),
        Document("globex-plan", "The Zephyr launch code of Globex is 9924. Globex ships rockets on Fridays.",
                 title="Globex plan", metadata={"tenant": "globex"})]
TOOL_SERVER = f"{sys.executable} {ROOT / 'tests' / 'mcp_tool_server.py'}"


def stdio(kb_dir: str, *flags: str) -> StdioServerParameters:
    """`agentic-rag mcp --kb kb_dir` as the SDK's client starts it (the test's environment passed on)."""
    import os

    return StdioServerParameters(command=sys.executable, args=["-m", "agentic_rag.cli", "mcp", "--kb", kb_dir, *flags],
                                 env=dict(os.environ), cwd=str(ROOT))


def http(port: int, path: str = "/mcp", key: str | None = None):
    """The SDK's client for serve's MCP endpoint, with a bearer key."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    client = httpx2.AsyncClient(headers=headers, timeout=60)
    return client, Client(streamable_http_client(f"http://127.0.0.1:{port}{path}", http_client=client), cache=None)


async def refused(call) -> str:
    """The message of the MCP error a call ends in."""
    with pytest.raises(MCPError) as caught:
        await call
    return str(caught.value)


# -- the server over stdio ---------------------------------------------------------------------------


def test_over_stdio_every_tool_and_resource_answers_and_ask_reports_its_steps(example_kb_dir):
    async def session():
        async with Client(stdio(example_kb_dir), cache=None) as client:
            assert client.server_info.name == "agentic-rag"
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert sorted(tools) == ["ask", "get_document", "list_documents", "search"]
            assert tools["search"].input_schema["properties"]["k"]["maximum"] == 50
            hits = (await client.call_tool("search", {"query": "2.3.1 认证失败", "k": 3})).structured_content["hits"]
            assert len(hits) == 3 and any(h["source"].endswith("nimbus-2.3.1.md") for h in hits)
            steps = []

            async def progress(done, total, message):
                steps.append(message)

            asked = await client.call_tool("ask", {"question": QUESTION}, progress_callback=progress)
            answer = asked.structured_content
            assert answer["stop_reason"] == "sufficient" and not answer["abstained"] and answer["citations"]
            assert steps == answer["trace_line"].split(" -> ")  # one notification per trace event
            assert "[1]" in asked.content[0].text and "Sources:" in asked.content[0].text
            first = (await client.call_tool("list_documents", {"limit": 5})).structured_content
            second = (await client.call_tool("list_documents", {"after": first["next_after"]})).structured_content
            listed = [d["doc_id"] for d in first["documents"] + second["documents"]]
            assert listed == sorted(listed) and len(set(listed)) == len(listed) > 20
            document = (await client.call_tool("get_document", {"doc_id": "NT-1042"})).structured_content
            assert "认证失败" in document["text"] and document["source"].endswith("tickets.jsonl:1")
            resources = (await client.list_resources()).resources
            assert [r.name for r in resources] == listed
            read = await client.read_resource(resources[0].uri)
            assert read.contents[0].text.startswith(document["text"][:20]) and str(resources[0].uri).startswith(
                "agentic-rag://kb/documents/")

    anyio.run(session)


def test_bad_arguments_are_mcp_errors_of_one_line(example_kb_dir):
    async def session():
        async with Client(stdio(example_kb_dir), cache=None) as client:
            for name, arguments, message in (
                    ("search", {"query": "x", "k": 0}, "search: k: Input should be greater than or equal to 1"),
                    ("search", {"query": ""}, "search: query: String should have at least 1 character"),
                    ("search", {"query": "x", "colour": "red"}, "search: colour: Extra inputs are not permitted"),
                    ("search", {"query": "x", "filters": {"a": {"like": 1}}}, "unknown range operators ['like']"),
                    ("ask", {}, "ask: question: Field required"),
                    ("delete_everything", {}, "no tool 'delete_everything'; the tools are search, ask, "),
                    ("get_document", {"doc_id": "nope"}, "no such document here")):
                said = await refused(client.call_tool(name, arguments))
                assert message in said and "\n" not in said, said
            said = await refused(client.read_resource("agentic-rag://kb/documents/nope"))
            assert "no such document here" in said

    anyio.run(session)


# -- the server over HTTP, inside serve --------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory, example_kb_dir):
    """serve over two collections (the example, and two tenants' documents) with a keys file whose
    acme key reads docs only, within {"tenant": "acme"}; answers by a hosted model on a local server."""
    from agentic_rag import KnowledgeBase

    folder = tmp_path_factory.mktemp("mcp-served")
    kb = KnowledgeBase()
    kb.add_documents(DOCS)
    kb.save(folder / "docs")
    write_keys_file(folder / "keys.json", [
        {"id": "acme", "sha256": digest(ACME), "read": ["docs"], "filter": {"tenant": "acme"}},
        {"id": "operator", "sha256": digest(OPERATOR), "read": ["*"]}])
    with FakeOpenAI() as fake:
        process, port = start_service(f"docs={folder / 'docs'}", folder, "serve", "--kb", f"example={example_kb_dir}",
                                      "--keys-file", str(folder / "keys.json"), "--model", "small-model",
                                      "--base-url", fake.url, "--cache-size", "0")
        try:
            yield port, fake
        finally:
            stop_service(process)


def test_over_http_a_scoped_key_sees_its_scope_only_in_every_tool_and_resource(served):
    port, _ = served

    async def session(key, path="/mcp/docs"):
        transport, client = http(port, path, key)
        async with transport, client:
            hits = (await client.call_tool("search", {"query": "Zephyr launch code", "k": 10})).structured_content
            listed = (await client.call_tool("list_documents", {})).structured_content["documents"]
            resources = [r.name for r in (await client.list_resources()).resources]
            try:
                text = (await client.call_tool("get_document", {"doc_id": "globex-plan"})).content[0].text
            except MCPError as exc:
                text = str(exc)
            return {h["doc_id"] for h in hits["hits"]}, [d["doc_id"] for d in listed], resources, text

    assert anyio.run(session, OPERATOR) == ({"acme-plan", "globex-plan"}, ["acme-plan", "globex-plan"],
                                            ["acme-plan", "globex-plan"], DOCS[1].text)
    hits, listed, resources, text = anyio.run(session, ACME)
    assert hits == {"acme-plan"} and listed == resources == ["acme-plan"]
    assert "no such document here" in text and "9924" not in text

    async def without(key, path):
        transport, client = http(port, path, key)
        async with transport, client:
            await client.list_tools()

    for key, path, said in ((None, "/mcp/docs", "an API key is needed"), ("not-a-key", "/mcp/docs", "not valid"),
                            (ACME, "/mcp/example", "no collection 'example'"),
                            (OPERATOR, "/mcp", "this server has 2 collections: name one, /mcp/{name}")):
        with pytest.raises(BaseException) as caught:
            anyio.run(without, key, path)
        assert said in _innermost(caught.value), _innermost(caught.value)


def _innermost(exc: BaseException) -> str:
    """The message of the first exception inside exception groups (anyio's task groups wrap them)."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def test_over_http_a_page_of_another_origin_and_a_body_not_json_are_refused(served):
    from http.client import HTTPConnection

    port, _ = served
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()

    def post(headers):
        connection = HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("POST", "/mcp/docs", body=body, headers={"Authorization": f"Bearer {OPERATOR}", **headers})
        reply = connection.getresponse()
        status, data = reply.status, json.loads(reply.read())
        connection.close()
        return status, data

    status, data = post({"Content-Type": "application/json", "Origin": "http://evil.example"})
    assert status == 403 and "a page from http://evil.example may not call /mcp" in data["error"]["message"]
    assert data["jsonrpc"] == "2.0"  # a JSON-RPC error too, for an MCP client to show
    status, data = post({"Content-Type": "text/plain"})  # what a page may post without asking first
    assert status == 415 and "application/json" in data["error"]["message"]
    status, data = post({"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}"})
    assert status == 200 and [t["name"] for t in data["result"]["tools"]][0] == "search"

    async def cursor():
        transport, client = http(port, "/mcp/docs", OPERATOR)
        async with transport, client:
            listed = await refused(client.call_tool("list_documents", {"after": "a\x00b"}))
            return listed, await refused(client.list_resources(cursor="a\x00b"))

    listed, resources = anyio.run(cursor)
    assert "list_documents: after: String should match pattern" in listed
    assert "the cursor is not one this server gave" in resources


def test_over_http_ask_streams_progress_and_a_bad_argument_is_an_error(served):
    port, fake = served
    fake.chat.append(json.dumps({"answer": "2.3.1 修复了认证失败的问题。 [1]", "evidence_score": 0.9, "missing": []},
                                ensure_ascii=False))

    async def session():
        transport, client = http(port, "/mcp/example", OPERATOR)
        async with transport, client:
            steps = []

            async def progress(done, total, message):
                steps.append(message)

            asked = (await client.call_tool("ask", {"question": QUESTION}, progress_callback=progress))
            said = await refused(client.call_tool("search", {"query": "x", "mode": "dense"}))
            filtered = await refused(client.call_tool("ask", {"question": "x?", "filters": {"a": {"like": 1}}}))
            return asked.structured_content, steps, said + "\n" + filtered

    answer, steps, said = anyio.run(session)
    assert answer["answer"].startswith("2.3.1 修复了认证失败的问题") and answer["model"] == "small-model"
    assert steps == answer["trace_line"].split(" -> ")
    mode, filtered = said.split("\n")
    assert "search: mode: Input should be 'hybrid', 'bm25' or 'vector'" in mode
    assert filtered.startswith("ask: filters: ") and "unknown range operators ['like']" in filtered


def test_cancelling_an_ask_over_http_stops_its_run(served):
    """The client gives up once the run is under way (its first progress): the connection closes, the
    run stops at its next step (stop_reason stopped) and no more model calls are made."""
    port, fake = served
    reply = json.dumps({"answer": "2.3.1 修复了认证失败的问题。 [1]", "evidence_score": 0.9, "missing": []},
                       ensure_ascii=False)
    fake.chat.extend([{"content": reply, "delay": 2}] * 3)
    before = len(fake.chat_requests())

    async def session():
        transport, client = http(port, "/mcp/example", OPERATOR)
        async with transport, client:
            started = anyio.Event()

            async def progress(done, total, message):
                started.set()

            async with anyio.create_task_group() as group:
                group.start_soon(lambda: client.call_tool("ask", {"question": QUESTION + " 请说明"},
                                                          progress_callback=progress))
                await started.wait()
                group.cancel_scope.cancel()

    anyio.run(session)
    assert _stopped_runs(port) == 1  # waits for the run to end
    assert len(fake.chat_requests()) - before == 1 and len(fake.chat) == 2  # the call under way, and no other
    fake.chat.clear()


def _stopped_runs(port: int, wait_s: float = 120) -> int:
    """The service's count of runs that ended stopped, once there is one (a busy machine: up to wait_s)."""
    import time

    from agentic_rag.eval.service_load import http_call

    deadline = time.monotonic() + wait_s
    while True:
        text = http_call(port, "GET", "/metrics", key=OPERATOR)[1].decode()
        counted = [float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("agentic_rag_answers_total{") and 'stop_reason="stopped"' in line]
        if sum(counted) or time.monotonic() > deadline:
            return int(sum(counted))
        time.sleep(0.2)


# -- an MCP server's tools in the loop ---------------------------------------------------------------


def test_a_tool_of_an_mcp_server_answers_in_the_loop_and_is_cited_with_server_and_tool(example_kb):
    tools = mcp_tools(TOOL_SERVER + " good", patterns={"warehouse_stock": [r"\bin stock\b"]})
    assert [(t.name, t.kind, t.schema["required"]) for t in tools] == [("warehouse_stock", "mcp", ["item"])]
    assert "MCP server warehouse" in tools[0].description
    state = run_agentic_rag("How many units of umbrella are in stock?", example_kb, OfflineModel(), tools)
    assert format_trace(state).startswith("route:tool(warehouse_stock) -> tool:warehouse_stock -> generate")
    assert "41 units of umbrella" in state["answer"] and state["stop_reason"] == "sufficient"
    assert state["citations"][0]["source"].startswith('mcp:warehouse/warehouse_stock({"item": ')


def test_a_model_router_picks_an_mcp_tool_with_no_patterns_and_its_arguments_are_checked(example_kb):
    from agentic_rag import ScriptedModel

    tools = mcp_tools(TOOL_SERVER + " good")
    assert tools[0].model_routed and not tools[0].patterns  # only a model can place it
    answer = "The Berlin warehouse holds 7 units of lantern today. [1]"
    model = ScriptedModel({"route": [{"route": "tool", "tool": "warehouse_stock", "arguments": {"item": "lantern"}},
                                     {"route": "tool", "tool": "warehouse_stock", "arguments": {"item": 7}}]},
                          default={"route": {"route": "vector"}, "generate": {"answer": answer},
                                   "judge": {"score": 1.0, "complete": True},
                                   "grade": {"score": 0.2, "sufficient": False, "missing": ["stock"]}})
    question = "How many lanterns does the Berlin warehouse hold?"  # a plain question: no rule asks a model
    state = run_agentic_rag(question, example_kb, model, tools)
    routed = model.calls[0]
    assert routed.task == "route" and "warehouse_stock: Units of an item in stock" in json.dumps(
        routed.inputs["tools"]) and "'item': {'type': 'string'}" in json.dumps(routed.inputs["tools"])
    assert format_trace(state).startswith("route:tool(warehouse_stock) -> tool:warehouse_stock -> generate")
    assert state["citations"][0]["source"] == 'mcp:warehouse/warehouse_stock({"item": "lantern"})'
    state = run_agentic_rag(question, example_kb, model, tools)  # the model's arguments break the schema
    error = next(e for e in state["trace"] if e["step"] == "tool")["detail"]["error"]
    assert error == "bad arguments for warehouse_stock: item: 7 is not of type 'string'"
    assert state["stop_reason"] != "error" and "tool:warehouse_stock:error -> route:vector" in format_trace(state)


@pytest.mark.parametrize("mode, error", [
    ("error", "MCP server warehouse answered warehouse_stock with an error: unknown item"),
    ("dies", "tests/mcp_tool_server.py dies' failed: MCPError: Connection closed"),
    ("hangs", "tests/mcp_tool_server.py hangs' did not answer within 3.0 s"),
    ("garbage", "tests/mcp_tool_server.py garbage' sent a reply that is not an MCP result"),
])
def test_a_server_that_fails_ends_its_call_in_the_trace_and_the_run_goes_on(example_kb, mode, error):
    tools = mcp_tools(McpServer(f"{TOOL_SERVER} {mode}", timeout_s=3), patterns={"warehouse_stock": ["in stock"]})
    state = run_agentic_rag("How many units of umbrella are in stock?", example_kb, OfflineModel(), tools)
    called = [event for event in state["trace"] if event["step"] == "tool"]
    assert [event["summary"] for event in called] == ["tool:warehouse_stock:error"]
    assert error in called[0]["detail"]["error"], called[0]["detail"]["error"]
    assert state["stop_reason"] != "error" and "route:vector" in format_trace(state)  # searched instead
    assert not any(c["source"].startswith("mcp:") for c in state["citations"])


def test_no_call_runs_past_the_run_s_deadline(example_kb):
    from agentic_rag import Config

    tools = mcp_tools(McpServer(f"{TOOL_SERVER} hangs", timeout_s=60), patterns={"warehouse_stock": ["in stock"]})
    state = run_agentic_rag("How many units of umbrella are in stock?", example_kb, OfflineModel(), tools,
                            Config(deadline_s=3))
    error = next(e for e in state["trace"] if e["step"] == "tool")["detail"]["error"]
    assert "did not answer within" in error and float(error.split("within ")[1].split(" s")[0]) <= 3.0


def test_listing_an_unreachable_server_or_routing_to_a_tool_it_lacks_is_one_line():
    import socket

    from agentic_rag import ConfigurationError

    with socket.socket() as probe:  # a port nothing listens on; the URL carries a secret a message must not
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConfigurationError) as caught:
        mcp_tools(McpServer(f"http://user:pw@127.0.0.1:{port}/mcp?token=s3cret", timeout_s=10))
    said = str(caught.value)
    assert said.startswith(f"cannot list the tools: MCP server 'http://127.0.0.1:{port}/mcp' failed: ")
    assert "s3cret" not in said and "pw" not in said

    with pytest.raises(ConfigurationError, match=r"^cannot list the tools: MCP server .*sys.exit\(2\).* failed: "
                                                 r"MCPError: Connection closed$"):
        mcp_tools(McpServer(f"{sys.executable} -c 'import sys; sys.exit(2)'", timeout_s=10))
    with pytest.raises(ConfigurationError, match="MCP server warehouse has no tool 'stock'; it has warehouse_stock"):
        mcp_tools(TOOL_SERVER + " good", patterns={"stock": ["x"]})


def test_the_tools_of_serve_s_own_mcp_endpoint_work_as_tools_over_http(served, example_kb):
    port, _ = served
    tools = mcp_tools(McpServer(f"http://127.0.0.1:{port}/mcp/docs", headers={"Authorization": f"Bearer {ACME}"}),
                      patterns={"search": [r"\blaunch code\b"]}, prefix="tenants_")
    assert sorted(t.name for t in tools) == ["tenants_ask", "tenants_get_document", "tenants_list_documents",
                                             "tenants_search"]
    state = run_agentic_rag("What is the Zephyr launch code?", example_kb, OfflineModel(), tools)
    assert format_trace(state).startswith("route:tool(tenants_search) -> tool:tenants_search -> generate")
    assert "7731" in state["answer"] and "9924" not in json.dumps(state)  # the key's scope holds here too


def test_ask_calls_an_mcp_tool_the_offline_router_is_told_of(capsys, example_kb_dir):
    code, out, err = run(capsys, "ask", "How many units of lantern are in stock?", "--kb", example_kb_dir, "--json",
                         "--mcp", TOOL_SERVER + " good", "--mcp-route", "warehouse_stock=in stock")
    reply = json.loads(out)
    assert code == 0 and "7 units of lantern" in reply["answer"], err
    assert reply["citations"][0]["source"].startswith("mcp:warehouse/warehouse_stock(")
    code, out, err = run(capsys, "ask", "x?", "--kb", example_kb_dir, "--mcp", TOOL_SERVER + " good",
                         "--mcp-route", "stock=in stock")
    assert code == 1 and err.strip().endswith("no --mcp server has a tool 'stock'; they have warehouse_stock")


def test_a_cancelled_ask_over_stdio_ends_and_the_server_answers_on(example_kb_dir):
    with FakeOpenAI() as fake:
        reply = json.dumps({"answer": "2.3.1 修复了认证失败的问题。 [1]", "evidence_score": 0.9, "missing": []},
                           ensure_ascii=False)
        fake.chat.extend([{"content": reply, "delay": 2}] * 3)

        async def session():
            async with Client(stdio(example_kb_dir, "--model", "small-model", "--base-url", fake.url),
                              cache=None) as client:
                started = anyio.Event()

                async def progress(done, total, message):
                    started.set()

                async with anyio.create_task_group() as group:
                    group.start_soon(lambda: client.call_tool("ask", {"question": QUESTION},
                                                              progress_callback=progress))
                    await started.wait()
                    group.cancel_scope.cancel()
                return (await client.call_tool("search", {"query": "2.3.1", "k": 1})).structured_content

        assert anyio.run(session)["hits"]  # the server still answers
        assert len(fake.chat_requests()) <= 1 and len(fake.chat) >= 2  # the cancelled run made no more calls

