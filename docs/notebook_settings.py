"""How the gallery's notebooks run: read by ``conf.py`` (myst-nb) and ``run_notebooks.py`` alike.

Every gallery notebook runs in the build; an error in one fails it. ``cache`` re-runs a notebook
only when its code changed (``_build/.jupyter_cache``); ``BNN_ZOO_DOCS_EXECUTE=off`` skips running. The notebooks keep JAX's compiled programs where
the commands keep them (bnn-zoo's user cache), so a build reads back what an earlier one compiled.
"""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent

EXECUTION_MODE = os.environ.get("BNN_ZOO_DOCS_EXECUTE", "cache")
TIMEOUT = 300
CACHE_PATH = str(HERE / "_build" / ".jupyter_cache")
MYST_EXTENSIONS = ["colon_fence", "dollarmath", "deflist"]

# The MNIST example reads $MNIST_DIR, else the user's cache (downloading there). A checkout with
# the project's shared data beside it reads that copy.
_shared_mnist = HERE.parent.parent / "shared" / "data" / "mnist"
if "MNIST_DIR" not in os.environ and _shared_mnist.is_dir():
    os.environ["MNIST_DIR"] = str(_shared_mnist)

# The kernels inherit these: every compiled program kept, in the folder `bnn-zoo` commands use.
from bnn_zoo.cache import compile_cache_env  # noqa: E402

for _name, _value in compile_cache_env().items():
    os.environ.setdefault(_name, _value)
