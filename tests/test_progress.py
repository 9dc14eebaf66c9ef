"""Long per-layer loops take a `progress` wrapper (a tqdm bar in the job's log): it must see every
layer, in the order computed, and change no number."""

import numpy as np
import pandas as pd

from crosslayer.dynamics.spectra import spectral_profile
from crosslayer.dynamics.topology import layer_statistics
from crosslayer.linalg.schur import schur_dose_responses


class Recorder:
    """A progress wrapper that records what it was handed and passes it through."""

    def __init__(self):
        self.seen = []

    def __call__(self, items, *labels):
        items = list(items)
        self.seen.append((labels, len(items)))
        return iter(items)


def _jacobians(L=3, d=6, seed=0):
    return np.random.default_rng(seed).normal(size=(L, d, d)) / np.sqrt(6)


def test_schur_sweep_reports_every_layer_last_first_and_same_numbers():
    Js, seen = _jacobians(), []

    def progress(layers):
        layers = list(layers)
        seen.extend(layers)
        return layers

    kwargs = dict(modes=("J",), alphas=[0.0, 1.0], rank=4, draws=2, seed=1)
    plain = schur_dose_responses(Js, **kwargs)
    wrapped = schur_dose_responses(Js, **kwargs, progress=progress)
    assert seen == [2, 1, 0]
    for key, value in plain["J"].items():
        np.testing.assert_array_equal(wrapped["J"][key], value)


def test_spectral_profile_reports_both_passes_and_same_table():
    Js, recorder = _jacobians(), Recorder()
    plain, eig = spectral_profile(Js, k=2, draws=20)
    wrapped, eig_wrapped = spectral_profile(Js, k=2, draws=20, progress=recorder)
    assert recorder.seen == [(("J",), 3), (("J - I",), 3)]
    pd.testing.assert_frame_equal(wrapped, plain)
    np.testing.assert_array_equal(eig_wrapped, eig)


def test_layer_statistics_reports_every_layer_and_same_table():
    rng = np.random.default_rng(2)
    L, d = 3, 12
    Js = _jacobians(L, d)
    memberships = np.tile(np.repeat([0, 1, 2], 4), (2 * L, 1))
    participation = rng.uniform(size=(2 * L, d))
    kwargs = dict(n_random=10, tail=0.25, n_permutations=49, seed=0)
    recorder = Recorder()
    plain = layer_statistics(Js, memberships, participation, **kwargs)
    wrapped = layer_statistics(Js, memberships, participation, **kwargs, progress=recorder)
    assert recorder.seen == [((), L)]
    pd.testing.assert_frame_equal(wrapped, plain)


def test_bench_jobs_sums_each_rules_benchmark_files_and_times_its_scripts_imports(tmp_path, capsys):
    from bench.jobs import _script_of_rules, bench_jobs

    assert _script_of_rules()["block_jacobians"] == "block_jacobians"
    assert _script_of_rules()["plot_across_papers_models"] == "plot_across_papers_models"
    (tmp_path / "register_checkpoint" / "m").mkdir(parents=True)
    for step, s in ((0, 0.25), (1, 0.5)):
        (tmp_path / "register_checkpoint" / "m" / f"step{step}.tsv").write_text(f"s\th:m:s\n{s}\t0:00:00\n")
    (tmp_path / "alignment_table.tsv").write_text("s\th:m:s\n2.0\t0:00:02\n")
    table = bench_jobs(tmp_path).set_index("rule")
    assert table.loc["register_checkpoint", "jobs"] == 2 and table.loc["register_checkpoint", "job_s"] == 0.75
    assert table.loc["alignment_table", "job_s"] == 2.0
    assert (table["import_s"] > 0).all()
    assert "3 jobs, 3 job-s" in capsys.readouterr().out
