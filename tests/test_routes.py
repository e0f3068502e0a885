"""The route table: each endpoint declared once, and routing, a collection's dispatch, the labels of
metrics and spans, /openapi.json and the docs' listing all read from it; the service's modules import
one another one way only, and nothing of the command line."""
import ast
from operator import attrgetter

import pytest

from agentic_rag import KnowledgeBase, OfflineModel
from agentic_rag.kb import Document
from agentic_rag.service import ROUTES, Collections, create_app, route_listing
from agentic_rag.service._openapi import openapi
from agentic_rag.service._routes import (
    COLLECTION_ENDPOINTS,
    COLLECTION_HAS,
    COLLECTION_ROUTES,
    SERVICE_ROUTES,
    endpoint_label,
)
from helpers import ROOT

SERVICE = ROOT / "agentic_rag" / "service"


def test_each_route_is_declared_once_and_openapi_lists_exactly_the_table():
    declared = [(route.method.lower(), route.path) for route in ROUTES]
    assert len(declared) == len(set(declared))
    listed = [(method, path) for path, operations in openapi()["paths"].items() for method in operations]
    assert listed == declared
    for route in ROUTES:  # the key, the body and the reply each as the table says
        operation = openapi()["paths"][route.path][route.method.lower()]
        assert ("security" in operation) == (route.need is not None), route
        assert ("requestBody" in operation) == (route.request is not None), route
        reply = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert reply == ({"$ref": f"#/components/schemas/{route.reply.__name__}"} if route.reply
                         else {"type": "object"}), route


def test_every_route_has_its_handler():
    kb = KnowledgeBase()
    kb.add_documents([Document("a", "a note")])
    app = create_app(OfflineModel(), kb=kb)
    for route in SERVICE_ROUTES:
        assert callable(attrgetter(route.handler)(app)), route
    for route in COLLECTION_ROUTES:  # answered by the collections app, or forwarded to a Service route
        assert callable(getattr(Collections, route.handler)) if route.forwards is None \
            else route.forwards in SERVICE_ROUTES, route


def test_a_collections_endpoints_and_the_labels_come_from_the_table():
    assert COLLECTION_ENDPOINTS == {"ask": ("/v1/ask", "read"), "search": ("/v1/search", "read"),
                                    "documents": ("/v1/documents", "write"), "healthz": ("/healthz", "read")}
    assert COLLECTION_HAS == "ask, search, documents, documents/{id} and healthz"
    for route in COLLECTION_ROUTES:  # documents and documents/{id}: one Service path, one grant, whatever the method
        if route.forwards is not None:
            head = route.path.split("/")[4]
            assert COLLECTION_ENDPOINTS[head] == (route.forwards.path.removesuffix("/{id}"), route.need), route
    labels = {"/v1/ask": "/v1/ask", "/v1/documents/a/b": "/v1/documents/{id}", "/v1/documents": "/v1/documents",
              "/v1/collections": "/v1/collections", "/v1/collections/hr/ask": "/v1/collections/{name}/ask",
              "/v1/collections/hr/documents/x": "/v1/collections/{name}/documents/{id}",
              "/v1/collections/hr/documents/": "/v1/collections/{name}/documents",
              "/v1/collections/hr/ask/x": "other", "/v1/collections/hr/nothing": "other", "/v1/askx": "other",
              "/openapi.json": "/openapi.json", "/": "other"}
    assert {path: endpoint_label(path) for path in labels} == labels


def test_the_docs_show_the_table_as_it_reads():
    for page in ("how-to/service.md", "concepts/architecture.md"):
        assert route_listing() in (ROOT / "docs" / page).read_text(encoding="utf-8"), page


def _imports(path):
    """The modules of the service folder `path` imports, and whether it imports the command line."""
    found, cli = set(), False
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update([node.module] if node.module else [alias.name for alias in node.names])
        if isinstance(node, ast.ImportFrom) and node.level == 2 and (node.module or "").startswith("cli"):
            cli = True
        if isinstance(node, ast.Import) and any(a.name.startswith("agentic_rag.cli") for a in node.names):
            cli = True
    return found, cli


@pytest.mark.parametrize("module", sorted(p.stem for p in SERVICE.glob("_*.py")))
def test_the_services_modules_import_one_way_and_nothing_of_the_command_line(module):
    graph = {p.stem: _imports(p)[0] for p in SERVICE.glob("*.py")}
    assert not _imports(SERVICE / f"{module}.py")[1], f"{module} imports the command line"
    seen, todo = set(), list(graph[module])
    while todo:  # everything the module reaches, through any chain of imports
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    assert module not in seen, f"{module} imports a module that imports it back"
