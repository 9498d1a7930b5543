"""What was written before the library's reshape still reads: the UCI job's record keys."""

import pandas as pd

from bnn_zoo.experiments.uci import command as uci, fits as uci_fits
from tests.test_layout import ROOT


def test_the_uci_jobs_keys_are_those_of_the_stored_table():
    """Every (data set, split, method) of benchmarks/results/uci/fits.csv, written before the one
    set of defaults, keeps its key: a store written then resumes instead of refitting."""
    fits = pd.read_csv(ROOT / "benchmarks" / "results" / "uci" / "fits.csv")
    for approach in ("advi", "fullrank_advi", "local_reparam", "dropout", "ensemble"):
        row = fits[(fits.uci == "yacht") & (fits.split == 0) & (fits.method == approach)].iloc[0]
        args = uci.build_parser().parse_args(["--datasets", "yacht", "--splits", "1", "--method", approach,
                                              "--data-dir", str(ROOT / "tests" / "data" / "uci")])
        [cfg] = uci.configs(args)
        assert uci_fits.fit_key(cfg) == row["key"], approach
