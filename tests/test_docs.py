"""The documentation's static checks: every public name has a numpydoc docstring that documents
its parameters, the README stays a guide, no user-facing page or comment carries dated
history, and every link to a page's anchor finds it. ``make docs`` (run by .ci/run) builds the site itself, warnings as errors."""

import importlib
import inspect
import pkgutil
import re
import warnings
from pathlib import Path

import pytest
from numpydoc.docscrape import ClassDoc, FunctionDoc

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ["models", "inference", "evaluation", "data", "experiments"]
SOURCE_DIRS = ["src", *SUBPACKAGES, "benchmarks"]


def modules() -> list[str]:
    names = ["bnn_zoo", "bnn_zoo.cli"]
    for sub in SUBPACKAGES:
        pkg = importlib.import_module(f"bnn_zoo.{sub}")
        names += [pkg.__name__] + [m.name for m in pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg.__name__}.")]
    return names


def public_objects():
    """(module, name, object) for each function and class in a library module's ``__all__`` that
    the module defines (re-exports are checked where they are defined). The experiments are the
    command line, not the library: their modules need a docstring and ``__all__`` only."""
    out = []
    for name in (n for n in modules() if n.split(".")[:2] != ["bnn_zoo", "experiments"]):
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == name:
                out.append(pytest.param(name, attr, obj, id=f"{name}.{attr}"))
    return out


@pytest.mark.parametrize("name", modules())
def test_every_module_has_a_docstring_and_all(name):
    module = importlib.import_module(name)
    assert (module.__doc__ or "").strip(), f"{name} has no module docstring"
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what the module lacks: {missing}"


def _signature(obj) -> list[str]:
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return []
    return [p for p in params if p not in ("self", "cls")]


def _names(section) -> list[str]:
    return [n.strip().lstrip("*") for item in section for n in item.name.split(",") if n.strip()]


@pytest.mark.parametrize(("module", "name", "obj"), public_objects())
def test_public_names_have_numpydoc_docstrings(module, name, obj):
    assert (inspect.getdoc(obj) or "").strip(), f"{module}.{name} has no docstring"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpydoc warns on sections it cannot parse
        doc = ClassDoc(obj) if inspect.isclass(obj) else FunctionDoc(obj)
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return  # an exception takes its message; nothing more to document
    documented = _names(doc["Parameters"])
    accepted = documented + (_names(doc["Attributes"]) if inspect.isclass(obj) else [])
    if inspect.isclass(obj):  # a subclass's inherited fields are documented on its base class
        for base in obj.__mro__[1:]:
            if base.__module__.startswith("bnn_zoo") and (inspect.getdoc(base) or "").strip():
                accepted += _names(ClassDoc(base)["Parameters"])
    signature = _signature(obj)
    missing = [p for p in signature if p not in accepted]
    extra = [p for p in documented if p not in signature]
    assert not missing, f"{module}.{name}: parameters without documentation: {missing}"
    assert not extra, f"{module}.{name}: documented parameters it does not take: {extra}"


@pytest.mark.parametrize("name", modules())
def test_public_constants_are_documented(name):
    """A constant in ``__all__`` has a ``#:`` comment above its assignment (what autodoc renders)."""
    module = importlib.import_module(name)
    source = inspect.getsource(module)
    for attr in getattr(module, "__all__", []):
        obj = getattr(module, attr)
        if callable(obj) or not re.search(rf"^{attr}\s*(:[^=]+)?=", source, re.M):
            continue  # functions and classes are checked above; re-exports where defined
        assert re.search(rf"^#:.*\n(#:.*\n)*{attr}\s*(:[^=]+)?=", source, re.M), \
            f"{name}.{attr} has no '#:' comment above its assignment"


def test_readme_is_a_guide_of_at_most_200_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines"
    text = "\n".join(lines)
    assert "make demo" in text and "make test" in text


# History that belongs in CHANGELOG.md or the git log, never in a page or a comment.
HISTORY = [r"\b20\d\d-\d\d-\d\d\b", r"\bissue \d+", r"\bearlier (run|session|host)", r"\bprevious session",
           r"\bon another host", r"\bthis session\b"]


def _comments(path: Path) -> str:
    """The comments and docstrings of a Python file (its code stripped)."""
    text = path.read_text()
    comments = re.findall(r"#[^\n]*", text)
    docstrings = re.findall(r'"""(.*?)"""', text, re.S)
    return "\n".join(comments + docstrings)


def user_facing_texts():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "README.md"]
    pages = [p for p in pages if "_build" not in p.parts and p.exists()]
    sources = [p for d in SOURCE_DIRS for p in sorted((ROOT / d).rglob("*.py"))]
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in pages + sources]


@pytest.mark.parametrize("path", user_facing_texts())
def test_no_dated_history_in_pages_or_comments(path):
    text = path.read_text() if path.suffix == ".md" else _comments(path)
    patterns = HISTORY
    if path.name == "benchmarks.md":  # each benchmark's table names the host and date of its run
        patterns = HISTORY[1:]
    found = [m.group(0) for p in patterns for m in re.finditer(p, text, re.I)]
    assert not found, f"{path.relative_to(ROOT)} carries history: {found[:5]}"


def test_the_defaults_table_is_the_librarys_one_set_of_defaults():
    """The first table of the engine page's "Defaults and why" is `defaults.table()`, row for row."""
    from bnn_zoo.inference import defaults

    section = (ROOT / "docs" / "user_guide" / "engine.md").read_text().split("\n## Defaults and why\n", 1)[1]
    table = []
    for line in section.splitlines():
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif table:
            break
    header, rule, *rows = table
    assert header == ["setting", "value", "what it is"] and set("".join(rule)) <= set("-: ")
    assert [tuple(row) for row in rows] == defaults.table()


def test_every_gallery_notebook_is_in_the_gallery():
    gallery = ROOT / "docs" / "examples"
    index = (gallery / "index.md").read_text()
    notebooks = sorted(p.stem for p in gallery.glob("*.md") if p.name != "index.md")
    assert len(notebooks) >= 7
    for stem in notebooks:
        assert re.search(rf"^{stem}$", index, re.M), f"{stem} is missing from the gallery's toctree"
        assert "kernelspec:" in (gallery / f"{stem}.md").read_text(), f"{stem} is not a MyST notebook"


def test_the_gallery_runs_its_longest_notebook_first():
    """docs/run_notebooks.py starts notebooks by the seconds they took last time, longest first and an
    untimed one before all, so that the last to end is a short one (in a process of its own: the
    script sets the notebooks' environment)."""
    import subprocess
    import sys

    check = ("import sys; from pathlib import Path; sys.path.insert(0, 'docs'); import run_notebooks as r;"
             "paths = [Path(n) for n in ('a.md', 'b.md', 'c.md', 'd.md')];"
             "print([p.name for p in r.longest_first(paths, {'a.md': 10.0, 'b.md': 70.0, 'c.md': 5.0})])")
    proc = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "['d.md', 'b.md', 'a.md', 'c.md']"


def _anchors(page: Path) -> set[str]:
    """The anchors a Markdown page gives its links: its ``(label)=`` targets and its headings of
    levels 1-3 (``myst_heading_anchors = 3``) as MyST slugs them, GitHub-style, from their text."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    found = set(re.findall(r"^\(([^)\s]+)\)=\s*$", text, re.M))
    for heading in re.findall(r"^#{1,3} (.+?)\s*$", text, re.M):
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
        heading = re.sub(r"\{[a-z:]+\}`([^`]*)`", r"\1", heading)  # a role's target
        found.add(re.sub(r"[^\w\- ]", "", heading.replace("`", "").replace("*", "").lower()).replace(" ", "-"))
    return found


def _links(page: Path) -> list[tuple[Path, str]]:
    """The ``(page, anchor)`` of every link of ``page`` to an anchor of a Markdown page of the tree."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [((page.parent / target).resolve() if target else page, anchor)
            for target, anchor in re.findall(r"\]\(([^)\s#]*)#([^)\s]+)\)", text) if not target.startswith("http")]


def markdown_pages():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in pages if "_build" not in p.parts]


@pytest.mark.parametrize("page", markdown_pages())
def test_every_link_to_an_anchor_finds_it(page):
    """A link to ``page.md#anchor`` needs a heading or a label of that name there: Sphinx's build
    does not catch one whose anchor is missing (MyST renders it as a link to the page's top)."""
    broken = [f"{target.name}#{anchor}" + ("" if target.exists() else " (no such page)")
              for target, anchor in _links(page) if target.suffix == ".md" and
              (not target.exists() or anchor not in _anchors(target))]
    assert not broken, f"{page.relative_to(ROOT)} links to anchors that are not there: {broken}"


def test_the_anchor_check_sees_a_broken_link(tmp_path):
    (tmp_path / "a.md").write_text("# Did it work: `q_pareto_k`\n\n(q-k)=\n## Rungs\n")
    (tmp_path / "b.md").write_text("[ok](a.md#did-it-work-q_pareto_k) [ok](a.md#q-k) [ok](a.md#rungs) "
                                   "[broken](a.md#did-it-work-q-pareto-k) [ok](#here)\n# Here\n")
    assert [a for t, a in _links(tmp_path / "b.md") if a not in _anchors(t)] == ["did-it-work-q-pareto-k"]
