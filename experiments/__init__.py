"""Runnable experiments: ``python -m experiments.<name> --help``."""
