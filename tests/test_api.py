"""The public API: what `agentic_rag` and its public subpackages export, its reference page, and the
rule that documented code imports from `agentic_rag` only."""
import configparser
import importlib
import json
import os
import re
import subprocess
import sys

import agentic_rag
from helpers import ROOT, without

SUBPACKAGES = ("kb", "models", "steps", "tools", "eval", "mcp")
REFERENCE = ROOT / "docs" / "reference"
API_PAGE = REFERENCE / "api.md"


def _listed(page_text: str) -> dict[str, str]:
    """Each `name` in the first column of the page's tables, with its section heading."""
    listed, section = {}, ""
    for line in page_text.splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif match := re.match(r"\| `([\w.]+)` \|", line):
            listed[match.group(1)] = section
    return listed


def test_every_exported_name_resolves():
    for module in [agentic_rag] + [importlib.import_module(f"agentic_rag.{name}") for name in SUBPACKAGES]:
        assert len(module.__all__) == len(set(module.__all__)), f"{module.__name__}.__all__ repeats a name"
        assert [name for name in module.__all__ if not hasattr(module, name)] == [], module.__name__


def test_every_public_name_is_in_the_reference_docs():
    text = "\n".join(page.read_text(encoding="utf-8") for page in sorted(REFERENCE.glob("*.md")))
    names = set(agentic_rag.__all__)
    for name in SUBPACKAGES:
        names |= set(importlib.import_module(f"agentic_rag.{name}").__all__)
    assert sorted(name for name in names if f"`{name}`" not in text) == []


def test_the_api_page_lists_only_what_is_exported_and_where():
    listed = _listed(API_PAGE.read_text(encoding="utf-8"))
    for name, section in listed.items():
        if section == "Also in the subpackages":
            assert name not in agentic_rag.__all__, f"{name} is exported by agentic_rag: list it above"
            assert any(name in importlib.import_module(f"agentic_rag.{sub}").__all__ for sub in SUBPACKAGES), name
        else:
            assert name in agentic_rag.__all__, f"docs/reference/api.md lists {name}, which agentic_rag does not export"
    assert set(agentic_rag.__all__) <= set(listed)


def test_a_subpackage_exports_no_private_module():
    for name in SUBPACKAGES:
        module = importlib.import_module(f"agentic_rag.{name}")
        assert [n for n in module.__all__ if n.startswith("_")] == [], module.__name__


def _documented_code() -> list[tuple[str, str]]:
    """(file, code) for every example, the notebook's code cells and every Python block of the docs."""
    found = [(p.name, p.read_text(encoding="utf-8")) for p in sorted((ROOT / "examples").glob("*.py"))]
    for notebook in sorted((ROOT / "examples").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        found += [(notebook.name, "".join(c["source"])) for c in cells if c["cell_type"] == "code"]
    for page in sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]:
        found += [(str(page.relative_to(ROOT)), code)
                  for code in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)]
    return found


def test_documented_code_imports_from_agentic_rag_only():
    code = _documented_code()
    assert {where for where, _ in code} >= {"quickstart.py", "walkthrough.ipynb", "README.md"}
    deep = [(where, module) for where, text in code
            for module in re.findall(r"^\s*(?:from|import) (agentic_rag\.[\w.]+)", text, re.M)]
    assert deep == [], "import these from agentic_rag (add a missing name to its __all__)"


def test_the_version_is_written_once():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    assert config["metadata"]["version"] == "attr: agentic_rag.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", agentic_rag.__version__)


def test_the_package_ships_its_type_hints():
    """PEP 561: the marker sits in the package, and setup.cfg puts it in the wheel."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    assert config["options.package_data"]["agentic_rag"].split() == ["py.typed"]
    assert (ROOT / "agentic_rag" / "py.typed").is_file()


def test_importing_agentic_rag_does_not_load_the_openai_sdk():
    """The SDK more than doubles the import time; it is loaded where a client is made."""
    code = "import agentic_rag, sys; print('openai' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "False"


def test_importing_agentic_rag_loads_neither_hnswlib_nor_the_benchmarks_until_used():
    """hnswlib is loaded when a dense index first builds or loads its graph, the benchmarks when asked for."""
    code = ("import agentic_rag, sys; print(sorted(m for m in ('hnswlib', 'agentic_rag.eval') if m in sys.modules)); "
            "from agentic_rag import KnowledgeBase, Config, Document, run_bench; from helpers import DenseHashing; "
            "kb = KnowledgeBase(DenseHashing(), Config(exact_search_below=2)); "
            "kb.add_documents([Document(f'd{i}', f'text number {i}') for i in range(3)]); "
            "print(sorted(m for m in ('hnswlib', 'agentic_rag.eval') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})
    assert result.stdout.split("\n")[:2] == ["[]", "['agentic_rag.eval', 'hnswlib']"], result.stdout


def test_the_backend_protocol_asks_for_every_method_a_caller_may_use(tiny_kb):
    from agentic_rag import KnowledgeBaseBackend

    assert isinstance(tiny_kb, KnowledgeBaseBackend)
    assert isinstance(tiny_kb.restricted({"type": "ticket"}), KnowledgeBaseBackend)
    assert tiny_kb.held_documents(["nope", tiny_kb.search("login", k=1)[0].doc_id, "nope"]) == \
        [tiny_kb.search("login", k=1)[0].doc_id]
    # the command line's delete asks which ids are held: a backend without that is not one
    assert not isinstance(without(tiny_kb, "held_documents"), KnowledgeBaseBackend)
    assert isinstance(without(tiny_kb, "held_documents").search, type(tiny_kb.search))  # all else is there
