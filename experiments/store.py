"""A folder of Parquet records, one per fit: what ``bnn-zoo sweep``, ``uci`` and ``alternatives`` write.

The folder (:class:`Store`):

- ``records/<key>.parquet``: one row per fit, named by its key, written to a
  temporary file and renamed, by one process only;
- ``draws/<key>.nc``: the fit's draws, written before its record;
- ``fits.parquet``: every record in the store in one table
  (:meth:`Store.consolidate`);
- ``damaged/``: records that could not be read, set aside
  (:meth:`Store.set_aside_damaged`).

A record's presence means its fit is done, so a rerun of a killed job fits
only what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["Store"]


class Store:
    """A job's folder: one Parquet record per fit, written by this process only.

    Parameters
    ----------
    root : pathlib.Path
        The folder (``--out``).

    Attributes
    ----------
    records : pathlib.Path
        ``root / "records"``: one ``<key>.parquet`` per fit.
    draws : pathlib.Path
        ``root / "draws"``: one ``<key>.nc`` per fit, with ``--keep-draws``.
    """

    def __init__(self, root: Path):
        self.root = root
        self.records = root / "records"
        self.draws = root / "draws"

    def open(self) -> None:
        """Create the folder, and remove the temporary files a killed run left."""
        self.records.mkdir(parents=True, exist_ok=True)
        for folder in (self.root, self.records, self.draws):
            for stale in folder.glob(".*"):  # atomic_write's temporary files that a kill left behind
                if stale.is_file():
                    stale.unlink()

    def set_aside_damaged(self) -> list[tuple[str, str]]:
        """Move every record that cannot be read into ``root / "damaged"``, so that it is fitted again.

        A record cut short (a full disk, a bad copy) or otherwise unreadable would stop every later
        run of the sweep in pyarrow; set aside, its fit counts as not done, and the other records
        stay as they are. Its draws, if any, are overwritten by the new fit.

        Returns
        -------
        list of (str, str)
            Each damaged record's key and why it cannot be read.
        """
        import pyarrow.parquet as pq

        damaged = []
        for path in sorted(self.records.glob("*.parquet")):
            if path.name.startswith("."):
                continue
            try:
                pq.read_table(path)
            except Exception as err:  # pyarrow raises several types for a cut-short or garbled file
                (self.root / "damaged").mkdir(exist_ok=True)
                path.replace(self.root / "damaged" / path.name)
                damaged.append((path.stem, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"))
        return damaged

    def done(self) -> set[str]:
        """The keys of the fits in the store."""
        return {p.stem for p in self.records.glob("*.parquet") if not p.name.startswith(".")}

    def write(self, record: dict, draws=None) -> None:
        """Write a fit's record (lists as JSON text), and its draws first, each atomically."""
        import pandas as pd

        from bnn_zoo.inference.io import atomic_write

        if draws is not None:  # before the record: a record means that everything of its fit is there
            self.draws.mkdir(exist_ok=True)
            atomic_write(self.draws / f"{record['key']}.nc", lambda tmp: draws.to_netcdf(tmp))
        frame = pd.DataFrame([_flat(record)])
        atomic_write(self.records / f"{record['key']}.parquet", lambda tmp: frame.to_parquet(tmp, index=False))

    def table(self, keys: list[str]):
        """The records of ``keys`` as one DataFrame."""
        import pandas as pd

        frames = [pd.read_parquet(self.records / f"{k}.parquet") for k in keys]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def consolidate(self) -> Path:
        """``fits.parquet``: every record in the store (of this spec and of earlier ones)."""
        from bnn_zoo.inference.io import atomic_write

        table = self.table(sorted(self.done()))
        path = self.root / "fits.parquet"
        atomic_write(path, lambda tmp: table.to_parquet(tmp, index=False))
        return path


def _flat(record: dict) -> dict:
    # Parquet columns of one type: lists as JSON text.
    return {k: json.dumps(v) if isinstance(v, (list, tuple)) else v for k, v in record.items()}
