"""Sphinx configuration of the bnn-zoo documentation (``make docs``).

The API reference is generated from each module's ``__all__`` (``api/*.rst``, written on every
build); the example gallery is MyST-markdown notebooks under ``examples/``, executed by myst-nb.
"""

import importlib
import os
import pkgutil
import socket
import sys
from pathlib import Path

import bnn_zoo

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import notebook_settings  # noqa: E402  (the notebooks' settings, shared with run_notebooks.py)

project = "bnn-zoo"
author = "the bnn-zoo developers"
copyright = "the bnn-zoo developers"
release = version = bnn_zoo.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    "sphinx_design",
]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
html_static_path = ["_static"]
suppress_warnings = ["config.cache"]  # the intersphinx mapping below is computed, so never cached

# -- Markdown and notebooks -------------------------------------------------------------------
myst_enable_extensions = notebook_settings.MYST_EXTENSIONS
myst_heading_anchors = 3
# Every gallery notebook runs in the build (notebook_settings.py); `make docs` runs them side by
# side into the cache first (run_notebooks.py), and an error in one fails the build.
nb_execution_mode = notebook_settings.EXECUTION_MODE
nb_execution_timeout = notebook_settings.TIMEOUT
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
nb_execution_cache_path = notebook_settings.CACHE_PATH
nb_execution_excludepatterns = []
MNIST_NOTEBOOK = "examples/mnist_cnn"


def reachable(url: str, timeout: float = 3) -> bool:
    """Whether ``url``'s host accepts a connection on its scheme's port (no request is sent)."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/")[0]
    try:
        socket.create_connection((host, 443 if scheme == "https" else 80), timeout=timeout).close()
        return True
    except OSError:
        return False


def mnist_problem() -> str | None:
    """Why the MNIST notebook cannot run, in one line, or None.

    It runs when notebooks execute and it is not excluded; it finds the four files as
    :func:`bnn_zoo.data.mnist.fetch` does (``$MNIST_DIR``, else the user's cache), or downloads
    them, which needs a mirror to answer. Nothing is downloaded here.
    """
    from fnmatch import fnmatch

    from bnn_zoo.data import mnist

    excluded = any(fnmatch(f"{MNIST_NOTEBOOK}.md", p) for p in nb_execution_excludepatterns)
    if nb_execution_mode == "off" or excluded:
        return None
    folder = mnist.resolve_dir()
    if all((folder / f"{n}.gz").is_file() or (folder / n).is_file() for n in mnist.FILES.values()):
        return None
    if any(reachable(m) for m in mnist.MIRRORS):
        return None  # the notebook downloads the missing files into the folder
    return (f"make docs: the MNIST notebook ({MNIST_NOTEBOOK}.md) needs MNIST, which is not in {folder} "
            "and cannot be downloaded (no mirror reachable): set MNIST_DIR to a folder with its four "
            "IDX files, or build online (BNN_ZOO_DOCS_EXECUTE=off builds without running notebooks)")


# Checked before anything runs, so that a build without the data stops at once, not minutes in.
if (_problem := mnist_problem()) is not None:
    print(_problem, file=sys.stderr, flush=True)
    os._exit(2)  # Sphinx turns an exception or sys.exit here into a traceback report

# -- API reference ----------------------------------------------------------------------------
autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"  # the numpydoc Parameters sections carry the types
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

SUBPACKAGES = {
    "models": "Priors and model builders",
    "inference": "The ADVI engine and posterior handling",
    "evaluation": "Metrics, pruning, plots and comparison tables",
    "data": "Data sets: toy, regression, MNIST",
    "experiments": "The command-line experiments (their modules; the library is above)",
}


#: The engine's API beyond its face: the modules of its wings a user calls (the functional core,
#: the comparison methods, q's ELBO for any fit), each with the names it documents (None: its
#: ``__all__``). The face, ``bnn_zoo.inference``, is what ``bnn_zoo`` re-exports. Every other
#: module of ``inference/`` is the engine's inside, as optax's ``_src`` is: shared between its
#: modules, not called by users, documented as code (its docstring on the internals page, its
#: names in the source) and free to change.
ENGINE_API = {
    "bnn_zoo.inference.advi.core": None,
    "bnn_zoo.inference.alternatives.baselines": None,
    "bnn_zoo.inference.alternatives.dropout": None,
    "bnn_zoo.inference.posterior.restarts": ["fit_elbo"],
}


def public_modules(package: str) -> list:
    """``package`` and its modules, each with its ``__all__``."""
    pkg = importlib.import_module(package)
    names = [package] + sorted(m.name for m in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."))
    return [importlib.import_module(n) for n in names]


def own_names(module) -> list[str]:
    """The names of ``module.__all__`` defined in ``module`` itself (re-exports are documented
    where they are defined, except at the package's root, the public API)."""
    names = []
    for name in getattr(module, "__all__", []):
        obj = getattr(module, name)
        home = getattr(obj, "__module__", module.__name__)
        if module.__name__ == "bnn_zoo" or home == module.__name__ or not callable(obj):
            names.append(name)
    return names


def module_heading(module) -> list[str]:
    """A module's section: its name as the heading, then its docstring."""
    heading = f"``{module.__name__}``"
    return [heading, "-" * len(heading), "", f".. automodule:: {module.__name__}", "   :no-members:", ""]


def engine_inside(modules: list) -> list:
    """Of the engine's modules, those neither its face nor in ``ENGINE_API``."""
    return [m for m in modules if m.__name__ != "bnn_zoo.inference" and m.__name__ not in ENGINE_API]


def api_page(title: str, modules: list) -> str:
    """One reST page: per module, its docstring, a summary table of its functions and classes
    (each on a page of its own), and its constants with their ``#:`` comments."""
    lines = [title, "=" * len(title), ""]
    for module in modules:
        lines += module_heading(module)
        if module.__name__ != "bnn_zoo" and hasattr(module, "__path__"):
            continue  # a subpackage's names are documented in the modules that define them
        if module.__name__.startswith("bnn_zoo.experiments"):
            continue  # the commands: what each module does, not the library's API
        names = own_names(module)
        if ENGINE_API.get(module.__name__) is not None:
            names = [n for n in names if n in ENGINE_API[module.__name__]]
        callables = [n for n in names if callable(getattr(module, n))]
        constants = [n for n in names if not callable(getattr(module, n))]
        if callables:
            lines += [f".. currentmodule:: {module.__name__}", "", ".. autosummary::",
                      "   :toctree: generated/", "   :nosignatures:", ""]
            lines += [f"   {n}" for n in callables] + [""]
        for n in constants:
            value = getattr(module, n)
            short = isinstance(value, (int, float, str, tuple)) and len(repr(value)) <= 60
            lines += [f".. autodata:: {module.__name__}.{n}"] + ([] if short else ["   :no-value:"]) + [""]
    return "\n".join(lines)


def internals_page(modules: list) -> str:
    """The engine's inside, for contributors: each module's docstring (what it holds), no names."""
    title = "The engine's inside: the wings of ``bnn_zoo.inference``"
    lines = [title, "=" * len(title), "",
             "What each module of the engine's wings holds, for a contributor (the map by floor is in",
             ":doc:`../contributing`). Their names are shared between the engine's modules and are not",
             "API: they are documented in the source and change without notice. A user calls",
             ":doc:`the engine's face <inference>`.", ""]
    for module in modules:
        lines += module_heading(module)
    return "\n".join(lines)


def write_api_reference() -> None:
    out = HERE / "api"
    out.mkdir(exist_ok=True)
    pages = {"bnn_zoo": api_page("The public API: ``bnn_zoo``", [importlib.import_module("bnn_zoo")])}
    for sub, title in SUBPACKAGES.items():
        modules = public_modules(f"bnn_zoo.{sub}")
        if sub == "inference":  # the face and ENGINE_API; the rest on the internals page
            modules = [m for m in modules if m not in engine_inside(modules)]
        pages[sub] = api_page(f"{title}: ``bnn_zoo.{sub}``", modules)
    pages["internals"] = internals_page(engine_inside(public_modules("bnn_zoo.inference")))
    index = ["API reference", "=============", "",
             "What a user calls, with its numpydoc docstring: every name in a module's ``__all__``, and of",
             "the engine its face and the modules ``ENGINE_API`` (``docs/conf.py``) names; the engine's",
             "inside is described for contributors on its own page.", "",
             ".. toctree::", "   :maxdepth: 2", ""] + [f"   {name}" for name in pages]
    pages["index"] = "\n".join(index) + "\n"
    # autosummary's pages of names no longer public would stay behind, outside every toctree
    generated = out / "generated"
    listed = {line.strip() for text in pages.values() for line in text.splitlines()}
    for page in generated.glob("*.rst") if generated.exists() else []:
        module, _, name = page.stem.rpartition(".")
        if name not in listed or f".. currentmodule:: {module}" not in listed:
            page.unlink()
    for name, text in pages.items():
        path = out / f"{name}.rst"
        if not path.exists() or path.read_text() != text:  # unchanged pages keep Sphinx's cache
            path.write_text(text)


write_api_reference()

# -- Links to the libraries this one builds on ------------------------------------------------
# Each inventory is used where its site answers; an offline build (CI reaches no documentation
# site) renders those names as plain text instead of failing on the fetch.
INTERSPHINX = {
    "python": "https://docs.python.org/3/",
    "numpy": "https://numpy.org/doc/stable/",
    "pymc": "https://www.pymc.io/projects/docs/en/stable/",
    "arviz": "https://python.arviz.org/en/stable/",
    "xarray": "https://docs.xarray.dev/en/stable/",
    "jax": "https://docs.jax.dev/en/latest/",
    "optax": "https://optax.readthedocs.io/en/latest/",
    "dask": "https://distributed.dask.org/en/stable/",
}


intersphinx_mapping = {k: (url, None) for k, url in INTERSPHINX.items() if reachable(url)}
intersphinx_timeout = 10
if len(intersphinx_mapping) < len(INTERSPHINX):
    missing = sorted(set(INTERSPHINX) - set(intersphinx_mapping))
    print(f"intersphinx: offline for {', '.join(missing)}; their names render as plain text", file=sys.stderr)

# -- HTML -------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "bnn-zoo"
html_css_files = ["custom.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_context = {"default_mode": "light"}
