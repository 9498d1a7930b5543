"""Mean-field against low-rank ADVI on the UCI boston network (752 values), split 0, twice each.

    python -m benchmarks.studies.uci_lowrank_time

``bnn-zoo uci``'s model and settings; prints each fit's seconds (compilation included; the
second of each pair is warm), ms per step and test scores.
"""
import warnings, time, bnn_zoo
from bnn_zoo.data import uci
from bnn_zoo.experiments.harness import runner
from bnn_zoo.experiments.uci import fits as job
warnings.simplefilter("ignore")
cfg = job.UCIConfig(uci="boston", split=0, approach="advi", **job.DEFAULTS)
split = uci.load("boston", 0, None)
m = job.model(cfg, split)
s = job.fit_settings(cfg)
for method in [bnn_zoo.MeanField(init_std=cfg.init_std), bnn_zoo.LowRank(init_std=cfg.init_std), bnn_zoo.MeanField(init_std=cfg.init_std), bnn_zoo.LowRank(init_std=cfg.init_std)]:
    t = time.perf_counter()
    f = bnn_zoo.fit(m, optimizer=runner.make_optimizer(cfg, cfg.lr, cfg.steps), **dict(s, method=method))
    print(f.method, f.layout.dim, round(time.perf_counter() - t, 1), "s", round(f.ms_per_step, 3), "ms/step", job.score_fit(f, cfg, split), flush=True)
