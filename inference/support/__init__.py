"""What every stage shares: the calls' Ctrl-C and warnings, renamed keywords, random seeds, files.

- :mod:`~bnn_zoo.inference.support.calls`: How a library call meets its caller: warnings that point at the caller's line, and a Ctrl-C that ends
- :mod:`~bnn_zoo.inference.support.io`: Atomic writes: a reader never sees a half-written result or checkpoint.
- :mod:`~bnn_zoo.inference.support.renamed`: Keywords the public functions took before, and a wrapper that names their spelling now in one line.
- :mod:`~bnn_zoo.inference.support.seeds`: Random seeds: the one check of what a public function's ``random_seed`` takes.
"""

__all__: list[str] = []  # the modules are the wing's content; the face is bnn_zoo.inference
