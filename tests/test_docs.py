"""Docs: every code block runs, unless the line before it says `<!-- not runnable: why -->`; the
reference pages name every Config field, state key and command-line option."""
import contextlib
import dataclasses
import io
import os
import re
import shutil
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from agentic_rag import AgentState, Config
from agentic_rag.cli import build_parser
from helpers import ROOT

PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"(?P<before>[^\n]*)\n```(?P<lang>\w*)\n(?P<code>.*?)```", re.S)


def blocks(page: Path):
    for match in FENCE.finditer("\n" + page.read_text(encoding="utf-8")):
        if match.group("lang") in ("python", "sh") and "not runnable" not in match.group("before"):
            yield match.group("lang"), match.group("code")


@pytest.mark.parametrize("page", [p for p in PAGES if list(blocks(p))], ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run(page, tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for name in ("AGENTIC_RAG_MODEL", "AGENTIC_RAG_BASE_URL", "AGENTIC_RAG_EMBEDDING_MODEL"):
        env.pop(name, None)
    for lang, code in blocks(page):
        command = [sys.executable, "-c", code] if lang == "python" else ["bash", "-euo", "pipefail", "-c", code]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{page.name}: {code[:200]}\n{done.stderr[-2000:]}"


def test_every_markdown_link_resolves():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+\.(?:md|ipynb|py))\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


def _anchors(page: Path) -> set[str]:
    """The anchors a Markdown renderer gives the page's headings (GitHub's rule: lower case, punctuation
    dropped, spaces to hyphens)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_markdown_anchor_names_a_heading():
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([^)#:]*\.md|)#([^)]+)\)", page.read_text(encoding="utf-8")):
            linked = page.parent / target if target else page
            assert anchor in _anchors(linked), f"{page.relative_to(ROOT)} links to {target}#{anchor}: no such heading"


def test_reference_pages_name_everything():
    config = (ROOT / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    assert all(f"`{f.name}`" in config for f in dataclasses.fields(Config))
    state = (ROOT / "docs" / "reference" / "state.md").read_text(encoding="utf-8")
    assert all(f"`{key}`" in state for key in AgentState.__annotations__)
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    sections = {m.group(1): m.group(2) for m in re.finditer(r"^## (\S+)\n(.*?)(?=^## |\Z)", cli, re.M | re.S)}
    commands = re.search(r"\{([\w,-]+)\}", build_parser().format_usage()).group(1).split(",")
    for name in commands:
        assert name in sections, f"docs/reference/cli.md has no section ## {name}"
        for option in _options(name):   # in the command's own section, as a whole word (--k is not --kb)
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", sections[name]), \
                f"docs/reference/cli.md does not name {name} {option}"


def _options(command: str) -> set[str]:
    """The options of one command, read from its usage line as `agentic-rag COMMAND --help` shows it."""
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    usage = shown.getvalue().split("\n\n")[0]
    return set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", usage)) - {"-h", "--help"}


def test_every_kb_folder_the_docs_make_is_git_ignored():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the project's repository")
    folders = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        words = text.split()
        named = (after.split("=", 1)[1] if re.match(r"\w+=", after) else after  # a collection's NAME=DIR
                 for before, after in ((b, a.strip("'\"")) for b, a in pairwise(words)) if before == "--kb")
        folders |= {after for after in named if not after[0].isupper()  # not a placeholder such as DIR
                    and not after.startswith("postgresql://")}          # nor a database
        folders |= {part.split('"')[0] for part in text.split('.save("')[1:]}
    assert {".kb", "kb-quickstart", "kb-tour"} <= folders
    for folder in sorted(folders):
        done = subprocess.run(["git", "check-ignore", "-q", f"{folder}/"], cwd=ROOT)
        assert done.returncode == 0, f"{folder}/ (built by the docs) is not in .gitignore"


def test_the_quickstart_puts_agentic_rag_on_path_before_running_it():
    page = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    activate = page.find("source .venv/bin/activate")
    assert 0 <= activate < page.find("\nagentic-rag "), "say to activate the virtual environment first"


def test_every_page_a_source_comment_cites_exists():
    cited = {word.strip("()[]{}\"'`,.;:").rstrip(".") for path in sorted((ROOT / "agentic_rag").rglob("*.py"))
             for word in path.read_text(encoding="utf-8").split() if ".md" in word}
    pages = {name for name in cited if name.startswith("docs/") or name.endswith(".md") and name[:-3].isupper()}
    assert "docs/concepts/loop.md" in pages and [name for name in pages if not (ROOT / name).exists()] == []
