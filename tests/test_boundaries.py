"""The package's folders meet through their __init__: a private module (`_name.py`) is imported only
by modules of its own folder (its subfolders are part of it: kb/folder/ may use kb/_hit.py, as a room
uses its house's hall), and no two modules import each other."""
import ast
import re

from helpers import ROOT

PACKAGE = ROOT / "agentic_rag"


def module_name(path):
    """agentic_rag/kb/_hit.py -> "agentic_rag.kb._hit"; a folder's __init__.py is the folder's name."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path, at_run_time=False):
    """The modules a file imports, absolute: `from .x import y` gives the module x, and y too when y
    is a module of its own (a file or a folder). `at_run_time`: leave out imports under `if TYPE_CHECKING:`
    (a class naming, in an annotation, the class that holds it imports nothing when the code runs)."""
    name, is_package = module_name(path), path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for_types = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking(node.test)
                 for inner in ast.walk(node)} if at_run_time else set()
    found = set()
    for node in ast.walk(tree):
        if id(node) in for_types:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("agentic_rag"))
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if not target.startswith("agentic_rag"):
                continue
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}"))
    return found


def _type_checking(test):
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _is_module(name):
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def reaches():
    """(importer, private module) pairs where the importer is outside the private module's folder."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        folder = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for target in imported_modules(path):
            parts = target.split(".")
            private = [i for i, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")]
            owner = ".".join(parts[:private[0]]) if private else folder
            if folder != owner and not folder.startswith(owner + "."):
                found.append((importer, target))
    return found


def test_private_modules_are_imported_only_from_their_own_folder():
    found = reaches()
    assert not found, f"{len(found)} imports reach into another folder's private module (import through " \
                      f"that folder's __init__ instead):\n" + "\n".join(f"{a} -> {b}" for a, b in found)


def _nested(a, b):
    """A folder's __init__ and a module inside it: the folder exports what its modules define."""
    return a.startswith(b + ".") or b.startswith(a + ".")


def test_no_two_modules_import_each_other_when_the_code_runs():
    imports = {module_name(p): imported_modules(p, at_run_time=True) for p in PACKAGE.rglob("*.py")}
    circles = sorted({tuple(sorted((a, b))) for a, targets in imports.items() for b in targets
                      if a != b and a in imports.get(b, ()) and not _nested(a, b)})
    assert not circles, f"modules that import each other: {circles}"


# the package's floors, lowest first (docs/concepts/architecture.md draws them): a folder imports only
# folders on a floor below its own; the package root (the public names, __version__) stands outside them
FLOORS = (("text",), ("core",), ("kb", "tools"), ("models",), ("steps",), ("loop",), ("mcp",), ("service",),
          ("eval",), ("cli",))


def test_each_folder_imports_only_the_floors_below_it():
    floor = {folder: i for i, folders in enumerate(FLOORS) for folder in folders}
    assert set(floor) == {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}, "a folder has no floor"

    def folder_of(name):
        parts = name.split(".")
        return parts[1] if len(parts) > 1 else None

    upward = [(module_name(path), target) for path in PACKAGE.rglob("*.py") for target in imported_modules(path)
              if (a := folder_of(module_name(path))) and (b := folder_of(target)) and a != b and floor[b] >= floor[a]]
    assert not upward, "imports of a folder on the same floor or above:\n" + "\n".join(f"{a} -> {b}" for a, b in upward)


def test_the_architecture_page_draws_these_floors():
    page = (ROOT / "docs" / "concepts" / "architecture.md").read_text(encoding="utf-8")
    drawn = {name: int(n) for name, n in re.findall(r"^  (\w+)/\s+floor (\d+)", page, re.MULTILINE)}
    assert drawn == {folder: i for i, folders in enumerate(FLOORS) for folder in folders}
