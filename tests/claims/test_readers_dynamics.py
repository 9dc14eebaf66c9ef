"""Paper 004's readers (crosslayer.claims.readers.dynamics) on files written as the dynamics and
topology rules write them: the library functions their scripts call, on a small synthetic stack of
Jacobians, saved where the rules save them. Each reader hands over exactly the columns the
catalogue declares (model aside), with the values of the files."""

import numpy as np
import pandas as pd
import pytest

from crosslayer.claims.catalogue import load_catalogue
from crosslayer.claims.readers import files_of, read_tables, reader
from crosslayer.dynamics.regimes import depth_regimes, minimum_layer, regime_summary
from crosslayer.dynamics.spectra import spectral_profile
from crosslayer.dynamics.funnel import bottleneck_table
from crosslayer.dynamics.surgery import SCHUR_MODES, dose_response_table, fold_bottleneck, schur_dose_responses
from crosslayer.dynamics.topology import block_nmi, layer_statistics, topology_summary

MODEL, STEPS, L, D = "m", (0, 5), 5, 12
CATALOGUE = load_catalogue("004")
TABLES = [name for name in CATALOGUE.tables if name != "models"]


def jacobians(step):
    rng = np.random.default_rng(step)
    return np.eye(D) + rng.normal(scale=rng.uniform(0.1, 0.9, size=(L, 1, 1)) / np.sqrt(D), size=(L, D, D))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run directory holding what jacobian_spectra, dynamics_regimes, schur_surgery and
    topology_statistics write for one model at two checkpoints."""
    root = tmp_path_factory.mktemp("run")
    dynamics, topology = root / f"results/dynamics/{MODEL}", root / f"results/topology/{MODEL}"
    dynamics.mkdir(parents=True)
    topology.mkdir(parents=True)
    summaries, folds = [], {}
    for step in STEPS:
        Js, rng = jacobians(step), np.random.default_rng(100 + step)
        # jacobian_spectra: the profile, per-sample quartiles, regimes, the baseline from attrs
        table, _ = spectral_profile(Js, k=3, seed=0, draws=20, rank=D)
        for label, values in zip(("q25", "median", "q75"),
                                 np.percentile(rng.uniform(1, 9, size=(L, 30)), [25, 50, 75], axis=1)):
            table[f"{label}_condition_number"] = values
        table.insert(0, "regime", depth_regimes(L))
        table.assign(**table.attrs).to_csv(dynamics / f"step{step}.spectra.tsv", sep="\t")
        # block_jacobians' activations (samples x snapshots x units), as np.savez writes them: fewer
        # samples than units at step 0 (the correlation-graph stage warns), more at the last step
        samples = D - 2 if step == STEPS[0] else 3 * D
        np.savez(dynamics / f"step{step}.activations.npz", acts=rng.normal(size=(samples, 2 * L, D)).astype(np.float32),
                 n_tokens=np.full(samples, 8), sample_ids=np.arange(samples))
        # dynamics_regimes
        table = pd.read_csv(dynamics / f"step{step}.spectra.tsv", sep="\t", index_col="layer")
        layer, value = minimum_layer(table["self_alignment"])
        summaries.append(regime_summary(table.drop(columns=["regime", "baseline_mean", "baseline_sd"]),
                                        table["regime"]).reset_index()
                         .assign(step=step, min_self_alignment_layer=layer, min_self_alignment=value))
        # schur_surgery
        results = schur_dose_responses(Js, modes=SCHUR_MODES, alphas=(0.0, 0.5, 1.0), rank=D, draws=3, seed=0)
        pd.concat([dose_response_table(result).assign(mode=mode) for mode, result in results.items()]).to_csv(
            dynamics / f"step{step}.schur.tsv", sep="\t", index=False)
        # bottleneck_folds: three folds' mean Jacobians, each the stack plus its own noise
        fold_means = Js + rng.normal(scale=0.05 / np.sqrt(D), size=(3, L, D, D))
        folds[step] = fold_bottleneck(fold_means, rank=D, seed=0)
        # topology_statistics, two methods' partitions (blocks of units, reshuffled per snapshot)
        self_alignment = table["self_alignment"].to_numpy()
        layers, rows = [], []
        for method in ("signed_cpm", "infomap"):
            memberships = rng.integers(0, 3, size=(2 * L, D))
            participation = rng.uniform(0, 0.7, size=(2 * L, D))
            stats = layer_statistics(Js, memberships, participation, n_random=10, tail=0.25, n_permutations=50,
                                     q=0.05, seed=0)
            row, rate = topology_summary(stats, self_alignment, block_nmi(memberships), n_permutations=50, seed=0)
            rows.append({"method": method, **row})
            stats = stats.assign(self_alignment=self_alignment, **{k: np.append(v, np.nan) for k, v in rate.items()})
            layers.append(stats.assign(method=method).reset_index())
        pd.concat(layers).to_csv(topology / f"step{step}.coupling.tsv", sep="\t", index=False)
        pd.DataFrame(rows).to_csv(topology / f"step{step}.summary.tsv", sep="\t", index=False)
    regimes = pd.concat(summaries).set_index(["step", "regime"])
    regimes.insert(0, "n_layers", regimes.pop("n_layers"))
    regimes.to_csv(dynamics / "regimes.tsv", sep="\t")
    bottleneck_table(folds).to_csv(dynamics / "bottleneck.tsv", sep="\t", index=False)
    return root, read_tables(root, {name: {MODEL: list(STEPS)} for name in TABLES})


def source(root, name, step=None):
    pattern = {"spectra": "dynamics/{m}/step{s}.spectra.tsv", "regimes": "dynamics/{m}/regimes.tsv",
               "schur": "dynamics/{m}/step{s}.schur.tsv", "coupling": "topology/{m}/step{s}.coupling.tsv",
               "summary": "topology/{m}/step{s}.summary.tsv"}[name]
    return pd.read_csv(root / "results" / pattern.format(m=MODEL, s=step), sep="\t")


@pytest.mark.parametrize("name", TABLES)
def test_each_reader_gives_the_declared_columns(run, name):
    _, tables = run
    assert list(tables[name].columns) == list(CATALOGUE.tables[name].columns), name
    assert (tables[name]["model"] == MODEL).all() and set(tables[name]["step"]) == set(STEPS)
    assert reader(name).stage == ("topology" if name.startswith("topology/") else "dynamics")


def test_the_files_are_those_the_rules_write(run):
    root, _ = run
    for name in TABLES:
        for path in files_of({name: {MODEL: STEPS}}):
            assert (root / path).is_file(), path


def test_per_checkpoint_tables_hold_the_files_values(run):
    root, tables = run
    for name, keys in (("dynamics/spectra", ["layer"]), ("dynamics/schur", ["mode", "construction", "draw", "alpha",
                                                                             "start_layer"]),
                       ("topology/coupling", ["method", "layer"]), ("topology/summary", ["method"])):
        ours = tables[name]
        for step in STEPS:
            file = source(root, name.split("/")[1], step).set_index(keys).sort_index()
            rows = ours[ours["step"] == step].drop(columns=["model", "step"]).set_index(keys).sort_index()
            assert len(rows) == len(file), name
            added = ("depth", "readout", "n_samples", "n_units")  # by the readers
            columns = [c for c in rows.columns if c not in added]
            pd.testing.assert_frame_equal(rows[columns], file[columns], check_dtype=False, obj=name)
    spectra = tables["dynamics/spectra"]
    np.testing.assert_array_equal(spectra["depth"], spectra["layer"])
    assert spectra["readout"].tolist() == [layer == L - 2 for layer in range(L)] * len(STEPS)  # the last boundary
    assert spectra["layer"].tolist() == [*range(L)] * len(STEPS)
    assert tables["topology/coupling"]["significant"].dtype == bool


def test_the_baseline_is_one_row_per_checkpoint(run):
    root, tables = run
    baseline = tables["dynamics/baseline"]
    assert baseline["step"].tolist() == list(STEPS)
    for step in STEPS:
        file = source(root, "spectra", step)
        row = baseline[baseline["step"] == step].iloc[0]
        for column in ("baseline_mean", "baseline_sd"):
            assert file[column].nunique() == 1 and row[column] == file[column].iloc[0]


def test_the_regimes_are_the_rows_of_the_steps_asked_for(run):
    root, tables = run
    file = source(root, "regimes")
    columns = [c for c in CATALOGUE.tables["dynamics/regimes"].columns if c != "model"]
    pd.testing.assert_frame_equal(tables["dynamics/regimes"].drop(columns="model"), file[columns])
    one = reader("dynamics/regimes").read(root, MODEL, (STEPS[-1],))
    assert set(one["step"]) == {STEPS[-1]} and len(one) == (file["step"] == STEPS[-1]).sum()


def test_the_claims_evaluate_on_the_tables(run):
    # every testable claim gets a verdict from these tables (not "not testable" for a missing column)
    from crosslayer.claims.engine import evaluate

    _, tables = run
    for claim in CATALOGUE.claims:
        if claim.testable:
            verdict = evaluate(claim, tables, n_boot=200)
            assert "no column" not in verdict.reason and "no table" not in verdict.reason, (claim.id, verdict.reason)


def test_the_graph_stages_warning_about_its_power_reaches_the_verdicts(run):
    # the samples and units each checkpoint's graphs come from, read from the activations' header
    from crosslayer.claims.engine import evaluate

    _, tables = run
    coupling = tables["topology/coupling"]
    assert set(zip(coupling["step"], coupling["n_samples"], coupling["n_units"])) == {(0, D - 2, D), (5, 3 * D, D)}
    at_init = evaluate(CATALOGUE.claim("004-mesoscale-at-init"), {
        **tables, "models": pd.DataFrame({"model": [MODEL], "untrained_step": [0], "repo": [None]})}, n_boot=200)
    assert f"correlation graphs rest on {D - 2} samples of {D} units (fewer samples than units" in at_init.reason
    trained = evaluate(CATALOGUE.claim("004-boundary-trained"), {
        name: table[table["step"] == 5] if "step" in table else table for name, table in tables.items()}, n_boot=200)
    assert "fewer samples than units" not in trained.reason


def test_the_controls_sit_beside_the_trained_stacks_rank(run):
    root, tables = run
    controls = tables["dynamics/controls"]
    assert set(controls["construction"]) == {"control_a", "control_b"}
    for step in STEPS:
        file = source(root, "schur", step)
        dose = file[file["construction"] == "dose"].set_index(["mode", "alpha", "start_layer"])["effective_rank"]
        rows = controls[controls["step"] == step]
        assert len(rows) == (file["construction"] != "dose").sum()
        expected = [dose[key] for key in zip(rows["mode"], rows["alpha"], rows["start_layer"])]
        np.testing.assert_array_equal(rows["trained_rank"], expected)
        np.testing.assert_allclose(rows["excess"], rows["effective_rank"] - rows["trained_rank"])


def test_the_bottleneck_names_the_two_ends_and_its_claims_take_folds_as_units(run):
    from crosslayer.claims.engine import evaluate

    _, tables = run
    bottleneck = tables["dynamics/bottleneck"]
    ends = bottleneck.set_index("start_layer")["composition"]
    assert set(ends[0]) == {"full"} and set(ends[L - 1]) == {"single"} and set(ends[1]) == {"partial"}
    assert len(bottleneck) == len(STEPS) * 3 * 2 * L  # steps x folds x doses x start layers
    for claim in ("004-funnel-depth", "004-schur-dissolves"):
        verdict = evaluate(CATALOGUE.claim(claim), tables)
        assert verdict.n == 3 and verdict.unit == "sample folds" and verdict.verdict != "not testable", verdict
    controls = evaluate(CATALOGUE.claim("004-schur-controls"), tables)
    assert controls.n == 3 and controls.unit == "control draws", controls


def test_a_run_without_folds_says_which_setting_left_the_bottleneck_untestable(run, tmp_path):
    from crosslayer.claims.engine import evaluate

    root, tables = run
    empty = tmp_path / f"results/dynamics/{MODEL}"
    empty.mkdir(parents=True)
    bottleneck_table({}).to_csv(empty / "bottleneck.tsv", sep="\t", index=False)  # bottleneck_folds at folds 0
    read = read_tables(tmp_path, {"dynamics/bottleneck": {MODEL: list(STEPS)}})
    verdict = evaluate(CATALOGUE.claim("004-schur-dissolves"), {**{k: v for k, v in tables.items()
                                                                    if k != "dynamics/bottleneck"}, **read})
    assert verdict.verdict == "not testable" and "dynamics.folds is 0" in verdict.reason
