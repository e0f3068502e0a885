from helpers import ROOT


def test_ci_runs_the_readme_test_command():
    commands = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:6]
                if line.startswith("python3 -m venv")]
    assert len(commands) == 2
    assert commands[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
