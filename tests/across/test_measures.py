"""The per-paper readers of the across-papers stage (crosslayer.across.measures): each measure and its
random baseline from the arrays the stages store."""

import numpy as np
import pandas as pd
import pytest

from crosslayer.across import measures as read


# -- readers -----------------------------------------------------------------------------------------------


def test_alignment_reads_output_and_input_overlaps_with_the_baseline_mean():
    adjacent = pd.DataFrame({"step": [0, 0, 5, 5], "boundary": [1, 0, 0, 1], "left": [0.2, 0.1, 0.5, 0.6],
                             "right": [0.3, 0.4, 0.7, 0.8], "cross": 0.0})
    baseline = pd.DataFrame({"d_model": [64], "k": [4], "draws": [100], "seed": [0], "mean": [0.25], "sd": [0.02]})
    values = read.alignment_measures(adjacent, baseline).set_index(["step", "measure", "boundary"])
    assert values.loc[(0, "alignment_output", 0), "value"] == 0.1
    assert values.loc[(0, "alignment_input", 1), "value"] == 0.3
    assert values.loc[(5, "alignment_output", 1), "value"] == 0.6 and (values["baseline"] == 0.25).all()


def depthwise_table(M, K=3, step=0, variant="plain"):
    L = M.shape[0]
    return pd.DataFrame([{"step": step, "variant": variant, "K": K, "layer": i, "other": j,
                          "coupling_mean": M[i, j], "coupling_sd": 0.0} for i in range(L) for j in range(L)])


def test_coupling_reads_both_directions_of_each_boundary():
    M = -np.arange(16.0).reshape(4, 4) / 20  # M[layer, other]: J_layer on other's basis
    depthwise = pd.concat([depthwise_table(M), depthwise_table(M - 1, K=5), depthwise_table(M + 1, variant="cot")])
    values = read.coupling_measures(depthwise, Ks=[3], variant="plain").set_index(["measure", "boundary"])
    assert set(values.index.get_level_values("measure")) == {"coupling_K3_fwd", "coupling_K3_bwd"}
    for l in range(3):
        assert values.loc[("coupling_K3_fwd", l), "value"] == M[l, l + 1]
        assert values.loc[("coupling_K3_bwd", l), "value"] == M[l + 1, l]
    assert values["baseline"].eq(-np.sqrt(1 - 1 / 3)).all()
    released = read.coupling_measures(depthwise, Ks=[3], metric="released_l2")
    assert released["baseline"].isna().all()


def test_the_coupling_baseline_is_the_mis_coupling_of_haar_random_bases():
    from crosslayer.coupling.measure import miscoupling

    rng = np.random.default_rng(0)
    d, K, draws = 48, 10, 400
    J = rng.normal(size=(d, d)) * np.linspace(0.1, 3, d)  # any fixed Jacobian: the bases are random
    A = []
    for _ in range(draws):
        U = np.linalg.qr(rng.normal(size=(d, K)))[0]
        V = np.linalg.qr(rng.normal(size=(d, K)))[0]
        A.append(U.T @ J @ V)
    assert np.mean(miscoupling(np.array(A))) == pytest.approx(np.sqrt(1 - 1 / K), rel=0.01)


def test_continuity_and_jacobian_measures_are_the_stored_arrays():
    table = pd.DataFrame({"projection": ["q", "gate"], "present": [True, False], "baseline_u": [0.1, np.nan],
                          "baseline_v": [0.2, np.nan]})
    arrays = {"q.cos_u": np.array([0.5, 0.6]), "q.cos_v": np.array([0.7, 0.8])}
    values = read.continuity_measures({4: (arrays, table)}, ["q", "gate"]).set_index(["measure", "boundary"])
    assert sorted(set(values.index.get_level_values(0))) == ["continuity_q_u1", "continuity_q_v1"]
    assert values.loc[("continuity_q_v1", 1), "value"] == 0.8 and values.loc[("continuity_q_u1", 0), "baseline"] == 0.1

    spectra = pd.DataFrame({"layer": [0, 1, 2], "regime": ["early", "mid", "mid"],
                            "forward_alignment": [0.4, 0.5, np.nan], "forward_alignment_res": [0.1, 0.2, np.nan],
                            "baseline_mean": 0.3})
    values = read.jacobian_measures({7: spectra})
    assert list(values[values["measure"] == "jacobian_alignment"]["value"]) == [0.4, 0.5]
    assert list(read.depth_regimes({7: spectra})["regime"]) == ["early/mid", "mid"]


def test_community_nmi_is_the_block_nmi_with_a_permutation_baseline():
    from sklearn.metrics import normalized_mutual_info_score

    rng = np.random.default_rng(1)
    d, L = 60, 4
    blocks = [np.repeat(np.arange(4), 15)]
    for _ in range(L - 1):  # each block keeps most of the previous partition
        nxt = blocks[-1].copy()
        nxt[rng.choice(d, 10, replace=False)] = rng.integers(0, 4, 10)
        blocks.append(nxt)
    memberships = np.stack([b for block in blocks for b in (block, rng.permutation(block))])  # (2L, d)
    arrays = {"memberships": np.stack([memberships, memberships[::-1]]), "methods": np.array(["signed_cpm", "x"])}
    values = read.community_measures({3: arrays}, method="signed_cpm", draws=300, seed=0)
    expected = [normalized_mutual_info_score(a, b) for a, b in zip(blocks[:-1], blocks[1:])]
    np.testing.assert_allclose(values["value"], expected, atol=1e-12)
    # the baseline: sklearn's NMI of independently shuffled labels, averaged over other draws
    other = np.random.default_rng(99)
    for (a, b), baseline in zip(zip(blocks[:-1], blocks[1:]), values["baseline"]):
        independent = np.mean([normalized_mutual_info_score(a, other.permutation(b)) for _ in range(300)])
        assert baseline == pytest.approx(independent, abs=0.01) and baseline < 0.1
    with pytest.raises(ValueError, match="no 'infomap' partitions"):
        read.community_measures({3: arrays}, method="infomap")
