"""Run the gallery's notebooks side by side into the build's execution cache, before Sphinx reads them.

myst-nb runs the notebooks one after another while Sphinx reads the sources (``conf.py``'s
``nb_execution_mode = "cache"``, set in ``notebook_settings.py``). ``make docs`` calls this first:
it runs them ``--jobs`` at a time (default: one per core), as myst-nb would run each (the same
reader, working folder, timeout and kernel), and puts each executed notebook into the same
jupyter-cache, keyed by its code, where the build then finds it. A notebook already cached for
its code is not run again. One that fails is left out of the cache: the build runs it itself and
reports its error as it always does, so this step changes when a notebook runs, never whether
the build sees its failure. The longest start first, by the seconds each took in the last run on
this machine (kept in bnn-zoo's user cache, ``notebook_seconds.json``), so that the last to end
is a short one; a notebook never timed here goes first, the others after it alphabetically.

    python docs/run_notebooks.py [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import notebook_settings as settings  # noqa: E402  (conf.py's too: the cache, the timeout, the data)


def notebooks() -> list[Path]:
    """The gallery's notebooks: the Markdown files with a Jupyter kernel in their front matter."""
    return sorted(p for p in (HERE / "examples").glob("*.md") if "\nkernelspec:" in p.read_text()[:400])


def seconds_file() -> Path:
    """Where the seconds each notebook took are kept: bnn-zoo's user cache (not the checkout)."""
    from bnn_zoo.cache import user_cache

    return user_cache() / "notebook_seconds.json"


def longest_first(paths: list[Path], seconds: dict[str, float]) -> list[Path]:
    """``paths``, the longest by ``seconds`` (name -> seconds) first; an untimed one before all."""
    return sorted(paths, key=lambda p: (-seconds.get(p.name, float("inf")), p.name))


def read(path: Path):
    """``path`` as the notebook myst-nb builds from it (so that its cache key is the build's)."""
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    config = MdParserConfig(enable_extensions=set(settings.MYST_EXTENSIONS))
    return read_myst_markdown_notebook(path.read_text("utf8"), config, add_source_map=True, path=str(path))


def execute(path: Path) -> tuple[str, dict | None, float, str | None]:
    """Run one notebook in its own folder, as myst-nb does: the notebook, its seconds, its error."""
    from jupyter_cache.executors.utils import single_nb_execution

    result = single_nb_execution(read(path), cwd=str(path.parent), allow_errors=False,
                                 timeout=settings.TIMEOUT, meta_override=True)
    error = None if result.err is None else f"{type(result.err).__name__}: {result.err}"
    return str(path), (result.nb if result.err is None else None), result.time, error


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="run_notebooks.py", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="notebooks run at a time (default: one per core)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        print(f"run_notebooks.py: error: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    if settings.EXECUTION_MODE != "cache":
        return 0  # the build does not run notebooks (BNN_ZOO_DOCS_EXECUTE=off), or runs them itself

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(settings.CACHE_PATH)
    todo = []
    for path in notebooks():
        try:
            cache.match_cache_notebook(read(path))
        except KeyError:
            todo.append(path)
    try:
        timed = json.loads(seconds_file().read_text())
    except (OSError, ValueError):  # never run here, or a file that is not ours
        timed = {}
    timed = {k: v for k, v in timed.items() if isinstance(v, (int, float))} if isinstance(timed, dict) else {}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for future in as_completed([pool.submit(execute, p) for p in longest_first(todo, timed)]):
            path, nb, seconds, error = future.result()
            name = Path(path).relative_to(HERE)
            if error is not None:
                print(f"run_notebooks.py: {name} failed ({error}); the build runs it again and reports it",
                      file=sys.stderr)
                continue
            cache.cache_notebook_bundle(CacheBundleIn(nb, cache.add_nb_to_project(path).uri,
                                                      data={"execution_seconds": seconds}),
                                        check_validity=False, overwrite=True)
            print(f"run_notebooks.py: {name} in {seconds:.1f} s", flush=True)
            timed[Path(path).name] = round(seconds, 1)
    if todo:
        keep = seconds_file()
        keep.parent.mkdir(parents=True, exist_ok=True)
        staged = keep.with_name(f".{keep.name}.{os.getpid()}")
        staged.write_text(json.dumps(timed, indent=1, sort_keys=True))
        staged.replace(keep)  # whole or not at all
    print(f"run_notebooks.py: {len(todo)} notebooks in {time.perf_counter() - t0:.1f} s "
          f"({len(notebooks()) - len(todo)} cached), {args.jobs} at a time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
