"""One-off studies behind the product's defaults; what each asked and found is in docs/benchmarks.md#studies.

Each module runs as ``python -m benchmarks.studies.NAME`` (its docstring gives the command) and
writes its rows into ``benchmarks/results/studies/``.
"""
