"""Data set loaders. Downloaded files are cached under ``data/cache/`` (gitignored)."""
