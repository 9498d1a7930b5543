"""The library's shape: modules of one job and modest size, no reaches into another module's
private names, and the source documents named by their authors, never by a file number."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ["models", "inference", "evaluation", "data", "experiments", "src"]
MAX_LINES = 450


def python_files(dirs):
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", python_files(LIBRARY), ids=lambda p: str(p.relative_to(ROOT)))
def test_library_modules_are_at_most_450_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines: cut it along a seam"


def private_reaches(path: Path) -> list[str]:
    """``from bnn_zoo.x import _name`` and ``module._name`` where ``module`` is a bnn_zoo import."""
    tree = ast.parse(path.read_text())
    aliases, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bnn_zoo"):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {node.module} import {a.name}")
                aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            aliases.update(a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("bnn_zoo"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", python_files([*LIBRARY, "benchmarks", "tests"]),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_reaches_into_another_modules_private_names(path):
    assert private_reaches(path) == []


def test_the_private_reach_check_finds_one():
    sample = ROOT / "tests" / "_reach_sample.py"
    sample.write_text("from bnn_zoo.inference import prepare\nfrom bnn_zoo.data.toy import _x\nprepare._y\n")
    try:
        assert private_reaches(sample) == ["line 2: from bnn_zoo.data.toy import _x", "line 3: prepare._y"]
    finally:
        sample.unlink()


SEED_NUMBER = re.compile(r"\bseeds?[\s-]+00[0-4]\b", re.IGNORECASE)


def text_files():
    files = [ROOT / "README.md", *python_files([*LIBRARY, "benchmarks", "tests"])]
    files += sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)
    return files


@pytest.mark.parametrize("path", text_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_source_documents_are_named_by_their_authors_not_a_file_number(path):
    text = path.read_text()
    if path == Path(__file__):
        text = text.replace(SEED_NUMBER.pattern, "")
    hits = [m.group(0) for m in SEED_NUMBER.finditer(text)]
    assert not hits, f"{path.relative_to(ROOT)} says {hits[:3]}: name the document by its authors and title"


def test_the_contributing_page_maps_every_module():
    import importlib
    import pkgutil

    page = (ROOT / "docs" / "contributing.md").read_text()
    names = ["bnn_zoo", "bnn_zoo.cli"]
    for sub in ("models", "inference", "evaluation", "data", "experiments"):
        pkg = importlib.import_module(f"bnn_zoo.{sub}")
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, prefix=f"bnn_zoo.{sub}.")]
    missing = [n for n in names if f"`{n}`" not in page]
    assert not missing, f"docs/contributing.md's module map lacks {missing}"


#: The layers, lowest first: a module imports from its own layer's package or a lower layer, never
#: from a higher one (bnn_zoo.cache, a leaf, is below all; the root's public API is the top, which
#: only the command lines above the engine use).
LAYERS = {"data": 0, "models": 0, "inference": 1, "evaluation": 2, "experiments": 3}


def upward_imports(path: Path, layer: str) -> list[str]:
    """The bnn_zoo imports of ``path`` (in package ``layer``) that point at a higher layer or a sibling."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bnn_zoo"):
            modules = [node.module] if node.module != "bnn_zoo" else [f"bnn_zoo.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names if a.name.startswith("bnn_zoo")]
        else:
            continue
        for module in modules:
            target = module.split(".")[1] if "." in module else "bnn_zoo"
            if target == "cache" or target == layer:
                continue
            if target not in LAYERS or LAYERS[target] >= LAYERS[layer]:
                if not (layer == "experiments" and target not in LAYERS):  # the commands use the public API
                    found.append(f"line {node.lineno}: {module}")
    return found


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_imports_point_down_the_layers(layer):
    bad = {str(p.relative_to(ROOT)): upward_imports(p, layer) for p in python_files([layer])}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_layer_check_finds_an_upward_import():
    sample = ROOT / "tests" / "_layer_sample.py"
    sample.write_text("from bnn_zoo.data import toy\nfrom bnn_zoo.experiments import runner\nimport bnn_zoo\n")
    try:
        assert upward_imports(sample, "inference") == ["line 2: bnn_zoo.experiments", "line 3: bnn_zoo"]
    finally:
        sample.unlink()
