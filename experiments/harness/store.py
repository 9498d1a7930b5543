"""A folder of Parquet records, one per fit: what ``bnn-zoo sweep``, ``uci`` and ``alternatives`` write.

The folder (:class:`Store`):

- ``records/<key>.parquet``: one row per fit, named by its key, written to a
  temporary file and renamed, by one process only;
- ``draws/<key>.nc``: the fit's draws, written before its record;
- ``fits.parquet``: every record in the store in one table
  (:meth:`Store.consolidate`);
- ``damaged/``: records that could not be read, or that hold another
  record's content, set aside (:meth:`Store.set_aside_damaged`).

A record's presence means its fit is done, so a rerun of a killed job fits
only what is missing. A record is trusted only if it holds one row whose
``key`` is its file's name, and passes the job's own check of its columns
(``check``): one copied over another, cut short, holding two rows or lacking
a column is set aside and fitted again, so the table has one row per key.
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
    check : callable, optional
        A record (a dict: column -> value) -> what is wrong with it, or ``None``: the job's
        check of the record's columns, on top of the store's own (one row, its key's).

    Attributes
    ----------
    records : pathlib.Path
        ``root / "records"``: one ``<key>.parquet`` per fit.
    draws : pathlib.Path
        ``root / "draws"``: one ``<key>.nc`` per fit, with ``--keep-draws``.
    """

    def __init__(self, root: Path, check=None):
        self.root = root
        self.check = check
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
        """Move every record that is not its fit's into ``root / "damaged"``, so that it is fitted again.

        A record is damaged when it cannot be read (cut short by a full disk
        or a bad copy, or garbled), when it does not hold exactly one row, or
        when its ``key`` is not its file's name (another record copied over
        it, or a copy under a new name): trusted, it would stop the job in
        pyarrow, or put one fit in the table twice and leave another out. It
        is damaged too when the store's ``check`` finds fault with it (a
        column missing, or not finite). Set
        aside, its fit counts as not done, and the other records stay as they
        are. Its draws, if any, are overwritten by the new fit. A name taken
        in ``damaged/`` already gets a number (``<key>.1.parquet``).

        Returns
        -------
        list of (str, str)
            Each damaged record's key (its file's name) and what is wrong with it.
        """
        damaged = []
        for path in sorted(self.records.glob("*.parquet")):
            if path.name.startswith("."):
                continue
            why = _fault(path, self.check)
            if why is not None:
                folder = self.root / "damaged"
                folder.mkdir(exist_ok=True)
                target, n = folder / path.name, 0
                while target.exists():
                    n += 1
                    target = folder / f"{path.stem}.{n}{path.suffix}"
                path.replace(target)
                damaged.append((path.stem, why))
        return damaged

    def report_damaged(self, report) -> int:
        """Set the damaged records aside (:meth:`set_aside_damaged`), with a line each through ``report``.

        Parameters
        ----------
        report : callable
            Called with one line per record set aside: its key, what is
            wrong with it and where it went.

        Returns
        -------
        int
            The records set aside.
        """
        damaged = self.set_aside_damaged()
        for key, why in damaged:
            report(f"record {key} is damaged ({why}): set aside in {self.root / 'damaged'}")
        return len(damaged)

    def done(self) -> set[str]:
        """The keys of the fits in the store."""
        return {p.stem for p in self.records.glob("*.parquet") if not p.name.startswith(".")}

    def write(self, record: dict, draws=None) -> None:
        """Write a fit's record (lists as JSON text), and its draws first, each atomically."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from bnn_zoo.inference.support.io import atomic_write

        if draws is not None:  # before the record: a record means that everything of its fit is there
            self.draws.mkdir(exist_ok=True)
            atomic_write(self.draws / f"{record['key']}.nc", lambda tmp: draws.to_netcdf(tmp))
        table = pa.Table.from_pylist([_flat(record)])  # pyarrow's own: a third of pandas' time a record
        atomic_write(self.records / f"{record['key']}.parquet", lambda tmp: pq.write_table(table, tmp))

    def copy(self, source: str, record: dict) -> None:
        """Write ``record``, which is the fit of the record ``source`` under another key: its draws
        copied first, where ``source`` has them, then the record, each atomically."""
        from bnn_zoo.inference.support.io import atomic_write

        draws = self.draws / f"{source}.nc"
        if draws.exists():
            data = draws.read_bytes()
            atomic_write(self.draws / f"{record['key']}.nc", lambda tmp: Path(tmp).write_bytes(data))
        self.write(record)

    def table(self, keys: list[str]):
        """The records of ``keys`` as one DataFrame, one row per key, in their order.

        Raises ``ValueError`` if a record is not its key's alone: one that
        :meth:`set_aside_damaged` would set aside.
        """
        import pandas as pd

        frames = [pd.read_parquet(self.records / f"{k}.parquet") for k in keys]
        for key, frame in zip(keys, frames):
            if list(frame.get("key", [])) != [key]:
                raise ValueError(f"record {key} in {self.records} is damaged; the job sets it aside and fits it again")
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def consolidate(self) -> Path:
        """``fits.parquet``: every record in the store (of this spec and of earlier ones)."""
        from bnn_zoo.inference.support.io import atomic_write

        table = self.table(sorted(self.done()))
        path = self.root / "fits.parquet"
        atomic_write(path, lambda tmp: table.to_parquet(tmp, index=False))
        return path


def _fault(path: Path, check=None) -> str | None:
    """What is wrong with a record file, or ``None``: one row, whose ``key`` is the file's name, and
    nothing that ``check`` finds."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several types for a cut-short or garbled file
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    if "key" not in table.column_names:
        return "it has no key"
    keys = table.column("key").to_pylist()
    if len(keys) != 1:
        return f"it holds {len(keys)} rows, not one"
    if keys[0] != path.stem:
        return f"it holds the record of {keys[0]}"
    return None if check is None else check(table.to_pylist()[0])


def _flat(record: dict) -> dict:
    # Parquet columns of one type: lists as JSON text.
    return {k: json.dumps(v) if isinstance(v, (list, tuple)) else v for k, v in record.items()}
