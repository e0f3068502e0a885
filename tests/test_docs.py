"""Docs: every code block runs, unless the line before it says `<!-- not runnable: why -->`; the
reference pages name every Config field, state key and command-line option."""
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentic_rag import Config
from agentic_rag.cli import build_parser
from agentic_rag.state import AgentState
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


def test_reference_pages_name_everything():
    config = (ROOT / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    assert all(f"`{f.name}`" in config for f in dataclasses.fields(Config))
    state = (ROOT / "docs" / "reference" / "state.md").read_text(encoding="utf-8")
    assert all(f"`{key}`" in state for key in AgentState.__annotations__)
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    commands = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name, parser in commands.items():
        assert f"## {name}" in cli
        assert all(option in cli for a in parser._actions for option in a.option_strings if option not in ("-h", "--help"))
