"""The library's shape: modules of one job and modest size, no reaches into another module's
private names, and the source documents named by their authors, never by a file number."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ["models", "inference", "evaluation", "data", "experiments", "src"]
#: The most lines of code a module holds (docstrings, comments and blank lines not counted): a
#: module does one job, and one this long has usually taken on a second.
MAX_CODE_LINES = 300


def python_files(dirs):
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def code_lines(path: Path) -> int:
    """Lines of ``path`` that are code: not blank, not a comment, not in a docstring."""
    text = path.read_text()
    docs = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docs.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for i, line in enumerate(text.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


@pytest.mark.parametrize("path", python_files(LIBRARY), ids=lambda p: str(p.relative_to(ROOT)))
def test_library_modules_hold_at_most_300_lines_of_code(path):
    lines = code_lines(path)
    assert lines <= MAX_CODE_LINES, f"{path.relative_to(ROOT)} has {lines} lines of code: does it do two jobs?"


def test_code_lines_leave_out_docstrings_comments_and_blank_lines():
    sample = ROOT / "tests" / "_size_sample.py"
    sample.write_text('"""Module.\n\nMore."""\n\n# a comment\nX = 1\n\n\ndef f():\n    """Doc."""\n    return X\n')
    try:
        assert code_lines(sample) == 3
    finally:
        sample.unlink()


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


# --- the engine's wings: bnn_zoo.inference's stages, each a floor; imports point down -----------------

#: Each unit of ``bnn_zoo.inference`` (a top-level module, or a wing: a subpackage) and its floor,
#: lowest first. A module imports from its own unit or a lower floor, never from its floor's other
#: units or a higher one; the face (the package's ``__init__``) and the dispatch sit on top.
FLOORS = {
    "defaults": 0, "support": 0,  # the one defaults module; what every stage shares
    "compile": 1, "families": 1,  # the model to JAX; the q's
    "methods": 2, "diagnostics": 2,  # the registry of method values; did a fit work
    "posterior": 3,  # a fitted q: FitResult, draws, sample, predict
    "advi": 4,  # the ADVI loop and what it runs on
    "laplace": 5, "alternatives": 5,  # the Laplace approximation; NUTS, ensembles, SGLD, SWAG, dropout
    "auto": 6,  # the rungs, over Laplace and ADVI
    "dispatch": 7,  # fit, the one entry to every method
    "__init__": 8,  # the face: the names users call
}
INFERENCE = ROOT / "inference"


def unit_of(module: str) -> str:
    """The unit of a dotted ``bnn_zoo.inference...`` module name (``__init__`` for the package itself)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def imports_of(path: Path, package: str) -> list[tuple[int, str]]:
    """Every ``bnn_zoo`` module ``path`` imports, at module level or inside a function, with its line;
    ``from pkg import name`` counts as ``pkg.name`` (a submodule or a name of ``pkg``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = f"{base}.{node.module}" if node.module else base
            found += [(node.lineno, f"{module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bnn_zoo"):
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("bnn_zoo")]
    return found


def module_name(path: Path, top: Path = INFERENCE) -> str:
    rel = path.relative_to(top).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["bnn_zoo", top.name, *parts])


def upward_in_wings(path: Path, top: Path = INFERENCE, floors: dict[str, int] = FLOORS) -> list[str]:
    """The imports of ``path`` (a module of inference/, or of ``top`` on ``floors``) that point up, or
    sideways into another unit of its floor."""
    name = module_name(path, top)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    unit = "__init__" if path == top / "__init__.py" else unit_of(name)
    bad = []
    for line, target in imports_of(path, package):
        if target.split(".")[:2] != ["bnn_zoo", top.name]:
            continue
        other = unit_of(target)
        if other not in floors:
            other = "__init__"  # a public name from the face: bnn_zoo.inference.fit and the like
        if other != unit and floors[other] >= floors[unit]:
            bad.append(f"line {line}: {target} ({other}, floor {floors[other]}) from {unit} (floor {floors[unit]})")
    return bad


def test_every_unit_of_the_engine_has_a_floor():
    units = {p.stem if p.parent == INFERENCE else p.relative_to(INFERENCE).parts[0]
             for p in python_files(["inference"])}
    assert units == set(FLOORS), "a new module or wing of inference/ needs its floor in FLOORS (and its row " \
                                 "in docs/contributing.md)"


@pytest.mark.parametrize("path", python_files(["inference"]), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_engines_imports_point_down_its_floors(path):
    assert upward_in_wings(path) == []


def test_the_floor_check_finds_an_upward_import_inside_a_function():
    sample = INFERENCE / "posterior" / "_floor_sample.py"
    sample.write_text("from bnn_zoo.inference.compile import jaxmodel\n\n\ndef f():\n"
                      "    from bnn_zoo.inference.advi import loop\n    from bnn_zoo.inference import fit\n")
    try:
        assert [b.split(" (")[0] for b in upward_in_wings(sample)] == [
            "line 5: bnn_zoo.inference.advi.loop", "line 6: bnn_zoo.inference.fit"]
    finally:
        sample.unlink()


# --- the command line: bnn_zoo.experiments' families over the harness, each a floor ----------------

#: Each unit of ``bnn_zoo.experiments`` (a subpackage: the harness or a command family) and its floor,
#: lowest first, on the rule of the engine's wings: a module imports from its own unit or a lower
#: floor. The harness imports no family; a family imports the harness, and another family only
#: where that family's floor is lower.
EXPERIMENT_FLOORS = {
    "harness": 0,  # the runner, a run's settings and records, the flags, worker processes, the store
    "toy": 1, "mnist": 1, "regression": 1, "uci": 1,  # the families on the harness alone
    "sweep": 2,  # on the toy family's model and evaluation
    "alternatives": 2,  # its cases on the toy and regression families' models
    "__init__": 3,  # the package: the map, and nothing else
}
EXPERIMENTS = ROOT / "experiments"


def test_every_unit_of_the_experiments_has_a_floor():
    units = {p.stem if p.parent == EXPERIMENTS else p.relative_to(EXPERIMENTS).parts[0]
             for p in python_files(["experiments"])}
    assert units == set(EXPERIMENT_FLOORS), "a new module or family of experiments/ needs its floor in " \
                                            "EXPERIMENT_FLOORS (and its rows in docs/contributing.md)"


@pytest.mark.parametrize("path", python_files(["experiments"]), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_experiments_imports_point_down_their_floors(path):
    assert upward_in_wings(path, EXPERIMENTS, EXPERIMENT_FLOORS) == []


def test_the_floor_check_finds_the_harness_importing_a_family_and_a_family_another_beside_it():
    harness = EXPERIMENTS / "harness" / "_floor_sample.py"
    harness.write_text("from bnn_zoo.experiments.harness import flags\n\n\ndef f():\n"
                       "    from bnn_zoo.experiments.toy import priors\n")
    family = EXPERIMENTS / "toy" / "_floor_sample.py"
    family.write_text("from bnn_zoo.experiments.harness import runner\nfrom bnn_zoo.experiments.mnist import shared\n"
                      "from bnn_zoo.experiments import sweep\n")
    try:
        found = upward_in_wings(harness, EXPERIMENTS, EXPERIMENT_FLOORS)
        assert [b.split(" (")[0] for b in found] == ["line 5: bnn_zoo.experiments.toy.priors"]
        found = upward_in_wings(family, EXPERIMENTS, EXPERIMENT_FLOORS)
        assert [b.split(" (")[0] for b in found] == ["line 2: bnn_zoo.experiments.mnist.shared",
                                                     "line 3: bnn_zoo.experiments.sweep"]
    finally:
        harness.unlink()
        family.unlink()


def test_every_package_folder_is_a_package_of_the_distribution():
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {str(p.parent.relative_to(ROOT)) for p in python_files(LIBRARY) if p.name == "__init__.py"}
    assert folders == set(setup["package-dir"].values()), "pyproject.toml's package-dir misses a folder"
    assert set(setup["packages"]) == set(setup["package-dir"]), "pyproject.toml's packages and package-dir differ"


def import_graph() -> dict[str, set[str]]:
    """Each library module's bnn_zoo imports (of modules), at module level or inside functions."""
    paths = {}
    for sub in ("models", "inference", "evaluation", "data", "experiments"):
        for p in python_files([sub]):
            rel = p.relative_to(ROOT / sub).with_suffix("")
            paths[".".join(["bnn_zoo", sub, *[x for x in rel.parts if x != "__init__"]])] = p
    for p in python_files(["src"]):
        rel = p.relative_to(ROOT / "src").with_suffix("")
        paths[".".join(x for x in rel.parts if x != "__init__")] = p
    graph = {}
    for name, p in paths.items():
        package = name if p.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets = set()
        for _, target in imports_of(p, package):
            while target not in paths and "." in target:
                target = target.rsplit(".", 1)[0]  # a name of a module: the module
            if target in paths and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import loops: the strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_loop_anywhere_in_the_library():
    # A package's __init__ that imports its own modules is no loop: a module importing the package
    # means a name of it, which the graph resolves to the module that defines it only when named so.
    graph = {k: {t for t in v if not k.startswith(t + ".")} for k, v in import_graph().items()}
    assert cycles(graph) == []


def test_the_loop_check_finds_a_loop():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
