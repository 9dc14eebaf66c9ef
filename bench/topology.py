"""Benchmarks of topology and statistics.
"""

import numpy as np

from bench.common import _peak_rss_mib, _timed


def _factor_snapshot(N, d, rng, n_factors=32):
    """(N, d) float32 snapshot: every unit loads (random sign) on one of ``n_factors`` latent
    factors, plus a weak shared low-rank mix of all factors and unit noise."""
    F = rng.standard_normal((N, n_factors), dtype=np.float32)
    group = rng.integers(0, n_factors, d)
    loading = (rng.uniform(0.3, 1.0, d) * rng.choice([-1.0, 1.0], d)).astype(np.float32)
    mix = rng.standard_normal((n_factors, d), dtype=np.float32) * np.float32(0.3 / np.sqrt(n_factors))
    return F[:, group] * loading + F @ mix + rng.standard_normal((N, d), dtype=np.float32)


def bench_topology(dims=(576, 1024, 2048, 4096), samples=1000, k=10, threads=None, infomap_limit_s=60.0):
    """Print seconds per snapshot: correlation matrix, top-k graph, signed Leiden CPM (the pipeline),
    and the alternatives Leiden modularity and InfoMap; InfoMap is skipped above d = 2048 once a
    run took longer than ``infomap_limit_s``."""
    import warnings

    from crosslayer.errors import DegenerateInputWarning
    from crosslayer.stats.communities import infomap, leiden_modularity, n_nondegenerate, signed_leiden
    from crosslayer.stats.graphs import _build_graph, correlation_matrix, top_k_edges

    limits = None
    if threads:
        try:
            from threadpoolctl import threadpool_limits

            limits = threadpool_limits(threads)
        except ImportError:
            print(f"threadpoolctl is not installed: --threads {threads} ignored, set OPENBLAS_NUM_THREADS instead")
    rng = np.random.default_rng(0)
    print(f"activation-correlation topology of one snapshot ({samples} samples, top-{k} graph), seconds, one run each")
    print("pipeline = correlation + graph + signed Leiden CPM (gamma 0.05 / 0.05); modularity and InfoMap on |w|;"
          " comm = communities with >= 2 units; RSS = process peak so far, MiB")
    print(f"{'d':>5} {'edges':>7} {'corr':>7} {'graph':>7} {'CPM':>7} {'pipeline':>9} {'comm':>5}"
          f" {'modularity':>11} {'comm':>5} {'InfoMap':>9} {'comm':>5} {'RSS':>6}")
    last_infomap = 0.0
    skipped = False
    for d in dims:
        X = _factor_snapshot(samples, d, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateInputWarning)  # N < d is the paper's regime
            t_corr, R = _timed(lambda: correlation_matrix(X), 1)
        t_graph, graph = _timed(lambda: _build_graph(d, *top_k_edges(R, k)), 1)
        R = None  # frees the (d, d) matrix before community detection
        t_cpm, m_cpm = _timed(lambda: signed_leiden(graph), 1)
        t_mod, m_mod = _timed(lambda: leiden_modularity(graph), 1)
        if d > 2048 and last_infomap > infomap_limit_s:
            infomap_cells = f"{'skip':>9} {'-':>5}"
            skipped = True
        else:
            last_infomap, m_info = _timed(lambda: infomap(graph), 1)
            infomap_cells = f"{last_infomap:>9.3f} {n_nondegenerate(m_info):>5}"
        print(f"{d:>5} {graph.ecount():>7} {t_corr:>7.3f} {t_graph:>7.3f} {t_cpm:>7.3f} {t_corr + t_graph + t_cpm:>9.3f}"
              f" {n_nondegenerate(m_cpm):>5} {t_mod:>11.3f} {n_nondegenerate(m_mod):>5} {infomap_cells}"
              f" {_peak_rss_mib():>6.0f}")
    if skipped:
        print(f"skip: InfoMap not run above d = 2048 after a run took more than {infomap_limit_s:.0f} s")
    if limits is not None:
        limits.restore_original_limits()


def bench_permutation(sizes=(576, 1024, 4096), n_permutations=5000, repeat=3, communities=32,
                      spearman_permutations=10000, layer_sizes=(1024, 4096)):
    """Print seconds of the permutation tests of paper 004, batched (``crosslayer.stats.permutation``) vs a
    per-permutation loop on the same random stream, and of one layer's statistics."""
    import math

    from crosslayer.dynamics.statistics import boundary_node_test, jacobian_column_norms, mesoscale_test
    from crosslayer.stats.permutation import (
        permutation_test,
        permutation_test_loop,
        spearman_permutation,
        spearman_permutation_loop,
    )

    rng = np.random.default_rng(0)
    print(f"permutation tests, seconds, best of {repeat}; loop = same test one permutation at a time"
          " (same random stream: the p-values must agree)")
    print(f"{'test':<18} {'d':>5} {'n':>5} {'perms':>6} {'batched':>8} {'loop':>8} {'loop/batched':>13} {'same p':>7}")
    rows = []
    for d in sizes:
        k = math.floor(0.1 * d + 1e-9)  # as boundary_node_test: two tails of floor(10% of d) units
        top, bottom = rng.lognormal(0.05, 0.2, k), rng.lognormal(0.0, 0.2, k)
        rows.append(("boundary Cohen's d", d, 2 * k, n_permutations,  # defaults bind this d's tails
                     lambda a=top, b=bottom: permutation_test(a, b, "cohens_d", n_permutations=n_permutations),
                     lambda a=top, b=bottom: permutation_test_loop(a, b, "cohens_d", n_permutations=n_permutations)))
    x = rng.random(31)
    y = 0.3 * x + rng.random(31)
    rows.append(("Spearman", "-", 31, spearman_permutations,
                 lambda: spearman_permutation(x, y, n_permutations=spearman_permutations),
                 lambda: spearman_permutation_loop(x, y, n_permutations=spearman_permutations)))
    for name, d, n, perms, fast, slow in rows:
        t_fast, res_fast = _timed(fast, repeat)
        t_slow, res_slow = _timed(slow, repeat)
        p_fast = res_fast["p_value"] if isinstance(res_fast, dict) else res_fast.p_value
        p_slow = res_slow["p_value"] if isinstance(res_slow, dict) else res_slow.p_value
        print(f"{name:<18} {d:>5} {n:>5} {perms:>6} {t_fast:>8.4f} {t_slow:>8.3f} {t_slow / t_fast:>12.0f}x"
              f" {'yes' if p_fast == p_slow else 'NO':>7}")
    print()
    print(f"one layer: mesoscale test (100 random partitions, {communities} communities of uneven size) +"
          f" boundary coupling ({n_permutations} permutations), seconds, best of {repeat}")
    print(f"{'d':>5} {'C':>4} {'mesoscale':>10} {'boundary':>9} {'layer':>7}")
    for d in layer_sizes:
        J = np.eye(d) + rng.standard_normal((d, d)) / np.sqrt(d)
        membership = rng.choice(communities, size=d, p=rng.dirichlet(np.ones(communities)))
        participation = rng.random(d)
        participation[rng.random(d) < 0.02] = np.nan  # isolated units
        t_meso, _ = _timed(lambda: mesoscale_test(J, membership, n_random=100), repeat)
        t_bound, _ = _timed(lambda: boundary_node_test(jacobian_column_norms(J), participation,
                                                      n_permutations=n_permutations), repeat)
        print(f"{d:>5} {np.unique(membership).size:>4} {t_meso:>10.3f} {t_bound:>9.3f} {t_meso + t_bound:>7.3f}")
