"""Every example in examples/ runs, offline, top to bottom."""
import subprocess
import sys

import pytest

from helpers import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path):
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_quickstart_answers_and_abstains():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True,
                          text=True, timeout=300)
    assert "release-notes/nimbus-2.3.1.md" in done.stdout and "does not hold" in done.stdout
    assert "tool:order_status" in done.stdout
