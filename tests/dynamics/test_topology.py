"""Paper 004's topology (crosslayer.dynamics.topology): communities of factor activations, block NMI,
per-layer statistics and their progress reporting, the checkpoint coupling, the warnings, and the
method comparison named as in the paper."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from progress_recorder import Recorder, small_jacobians
from statsmodels.stats.multitest import multipletests

from crosslayer.dynamics.statistics import variance_captured
from crosslayer.dynamics.topology import (
    block_nmi,
    checkpoint_communities,
    layer_statistics,
    method_comparison,
    snapshot_graphs,
    topology_summary,
    warnings_about,
)
from crosslayer.stats import communities as C
from crosslayer.stats.communities import participation_coefficient, partition_nmi
from crosslayer.stats.graphs import correlation_graph


def factor_acts(n_samples=400, n_snapshots=4, blocks=4, size=12, seed=0):
    """(N, S, d) activations whose units form `blocks` correlated groups, regrouped per snapshot."""
    rng = np.random.default_rng(seed)
    d = blocks * size
    acts = np.empty((n_samples, n_snapshots, d))
    for s in range(n_snapshots):
        labels = rng.permutation(np.repeat(np.arange(blocks), size))
        factors = rng.standard_normal((n_samples, blocks))
        acts[:, s] = factors[:, labels] + 0.5 * rng.standard_normal((n_samples, d))
    return acts


@pytest.fixture(scope="module")
def communities():
    acts = factor_acts()
    graphs = snapshot_graphs(acts, k=6)
    return acts, graphs, checkpoint_communities(graphs, methods=("signed_cpm", "modularity"), seeds=(0, 1),
                                                resolution_neg=0.0)


def test_communities_recover_each_snapshots_groups(communities):
    acts, graphs, (memberships, participation, summary) = communities
    assert memberships.shape == participation.shape == (2, 4, 48)
    assert len(summary) == 2 * 4 and set(summary["method"]) == {"signed_cpm", "modularity"}
    for s in range(4):
        # units of one factor correlate strongly with each other: communities = the factor groups
        R = np.corrcoef(acts[:, s].T)
        same = R > 0.5
        for m in range(2):
            groups = memberships[m, s]
            np.testing.assert_array_equal(groups[:, None] == groups[None, :], same)
        np.testing.assert_allclose(participation[0, s], participation_coefficient(graphs[s], memberships[0, s]))
    cpm = summary[summary["method"] == "signed_cpm"].set_index("snapshot")
    assert (cpm["n_communities"] == 4).all() and (cpm["seed_nmi"] == 1).all()
    assert cpm.loc[1, "next_nmi"] == pytest.approx(partition_nmi(memberships[0, 1], memberships[0, 2]))
    assert np.isnan(cpm.loc[3, "next_nmi"]) and cpm.loc[2, "name"] == "layer 1 pre-attention"


def test_block_nmi_pairs_block_inputs(communities):
    _, _, (memberships, _, _) = communities
    nmi = block_nmi(memberships[0])
    assert nmi.shape == (1,) and nmi[0] == pytest.approx(partition_nmi(memberships[0, 0], memberships[0, 2]))


def test_layer_statistics_use_the_block_input_partition_and_bh(communities):
    _, _, (memberships, participation, _) = communities
    rng = np.random.default_rng(1)
    Js = np.eye(48) + 0.3 * rng.standard_normal((2, 48, 48))
    # odd snapshots (pre-MLP) get nonsense: the layer statistics must not read them
    memberships, participation = memberships[0].copy(), participation[0].copy()
    memberships[1::2] = 0
    participation[1::2] = np.nan
    table = layer_statistics(Js, memberships, participation, n_random=20, n_permutations=99, q=0.05, seed=3)
    assert list(table.index) == [0, 1]
    for layer in (0, 1):
        assert table.loc[layer, "variance_captured"] == pytest.approx(variance_captured(Js[layer], memberships[2 * layer]))
        assert table.loc[layer, "n_communities"] == 4
    reject, q, _, _ = multipletests(table["p_boundary"], alpha=0.05, method="fdr_bh")
    np.testing.assert_allclose(table["q_boundary"], q)
    np.testing.assert_array_equal(table["significant"], reject)


def test_checkpoint_coupling_spearman_and_rate_inputs():
    table = pd.DataFrame({"cohens_d": [0.1, -0.5, 0.9, 0.3, -0.2], "significant": [True, False, True, False, False],
                          "excess": [0.1, 0.2, 0.0, 0.3, 0.1], "p_mesoscale": [0.01, 0.2, 0.03, 0.5, 0.04],
                          "top_singular": [1.0, 1.5, 1.2, 2.0, 2.1], "variance_captured": [0.1, 0.2, 0.15, 0.3, 0.2]})
    alignment = np.array([0.3, 0.1, 0.9, 0.5, 0.2])
    nmi = np.array([0.9, 0.5, 0.7, 0.2])
    row, rate = topology_summary(table, alignment, nmi, n_permutations=999, seed=0)
    assert row["rho_alignment_d"] == pytest.approx(scipy.stats.spearmanr(alignment, table["cohens_d"])[0])
    assert row["frac_significant"] == 0.4 and row["n_significant"] == 2 and row["frac_mesoscale"] == 0.6
    assert row["median_abs_d"] == pytest.approx(0.3)
    np.testing.assert_allclose(rate["disruption"], 1 - nmi)
    np.testing.assert_allclose(rate["delta_top_singular"], [0.5, 0.3, 0.8, 0.1])
    assert row["rho_rate_top_singular"] == pytest.approx(scipy.stats.spearmanr(1 - nmi, [0.5, 0.3, 0.8, 0.1])[0])


def test_a_constant_unit_is_named_with_its_snapshot():
    acts = factor_acts(n_snapshots=2)
    acts[:, 1, 5] = 3.0
    with pytest.raises(ValueError, match=r"layer 0 pre-MLP \(snapshot 1\):.*\b5\b"):
        snapshot_graphs(acts, k=4)


def test_fewer_samples_than_units_warns_naming_the_snapshot():
    acts = factor_acts(n_samples=20, n_snapshots=1)
    with pytest.warns(UserWarning, match="layer 0 pre-attention: .*"):
        graphs = snapshot_graphs(acts, k=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = correlation_graph(acts[:, 0], k=4)
    assert graphs[0].get_edgelist() == direct.get_edgelist() and graphs[0].es["weight"] == direct.es["weight"]


def test_warnings_about_prefixes_and_keeps_the_category():
    with pytest.warns(RuntimeWarning, match="^layer 2: careful$"):
        with warnings_about("layer 2"):
            warnings.warn("careful", RuntimeWarning)


def test_layer_statistics_reports_every_layer_and_same_table():
    rng = np.random.default_rng(2)
    L, d = 3, 12
    Js = small_jacobians(L, d)
    memberships = np.tile(np.repeat([0, 1, 2], 4), (2 * L, 1))
    participation = rng.uniform(size=(2 * L, d))
    kwargs = dict(n_random=10, tail=0.25, n_permutations=49, seed=0)
    recorder = Recorder()
    plain = layer_statistics(Js, memberships, participation, **kwargs)
    wrapped = layer_statistics(Js, memberships, participation, **kwargs, progress=recorder)
    assert recorder.seen == [((), L)]
    pd.testing.assert_frame_equal(wrapped, plain)


def test_method_comparison_names_methods_as_the_paper():
    rows = [{"model": "m", "step": 0, "method": method, "frac_significant": 0.5, "n_significant": 1, "n_layers": 2,
             "median_abs_d": 0.1, "median_excess": 0.0, "frac_mesoscale": 1.0} for method in C.METHODS]
    table = method_comparison(rows)
    assert dict(zip(table["method"], table["label"])) == C.METHOD_LABELS
    assert table.columns[-1] == "label" and set(C.METHOD_LABELS) == set(C.METHODS)
    assert table["label"].isin(["signed Leiden CPM", "InfoMap"]).sum() == 2
    assert isinstance(table, pd.DataFrame)
