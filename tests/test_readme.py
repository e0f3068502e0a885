from helpers import ROOT


def test_ci_runs_the_readme_test_command():
    commands = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:6]
                if line.startswith("python3 -m venv")]
    assert len(commands) == 2
    assert commands[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_the_test_command_lints_before_it_tests():
    command = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:6]
               if line.startswith("python3 -m venv")][1]
    assert 0 < command.find(".venv/bin/ruff check .") < command.find("pytest")


def test_the_test_command_type_checks_after_the_lint_and_before_the_tests():
    command = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:6]
               if line.startswith("python3 -m venv")][1]
    assert command.find(".venv/bin/ruff check .") < command.find(" && .venv/bin/mypy && ") < command.find("pytest")
