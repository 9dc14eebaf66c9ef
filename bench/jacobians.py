"""Benchmarks of the Jacobians.
"""

import numpy as np

from bench.common import _hours, _peak_rss_mib, _timed
from bench.topology import _factor_snapshot


def _jacobian_layer(style, d, seed=0):
    """A one-layer transformers model of the given style and width, eval mode, float32."""
    import torch
    import transformers

    torch.manual_seed(seed)
    heads = max(1, d // 64)
    if style == "llama":
        config = transformers.LlamaConfig(vocab_size=8, hidden_size=d, num_hidden_layers=1, num_attention_heads=heads,
                                          intermediate_size=int(round(2.6875 * d)), hidden_act="silu")
    else:
        config = transformers.GPTNeoXConfig(vocab_size=8, hidden_size=d, num_hidden_layers=1,
                                            num_attention_heads=heads, intermediate_size=4 * d, hidden_act="gelu",
                                            use_parallel_residual=True)
    config._attn_implementation = "eager"
    return transformers.AutoModel.from_config(config).to(torch.float32).eval()


def _timed_with_gemm(fn, m, k, n, rounds=3):
    """``(best seconds of fn, its output, best float32 FLOP/s of an (m, k) @ (k, n) matmul)``,
    the two timed in alternation for `rounds` rounds: on a machine whose speed drifts (a shared
    host), both see the same conditions, so their ratio is not inflated by a slow reference."""
    import torch

    a, b = torch.randn(m, k), torch.randn(k, n)
    best, best_gemm, out = float("inf"), float("inf"), None
    for _ in range(rounds):
        t, out = _timed(fn, 1)
        best = min(best, t)
        best_gemm = min(best_gemm, _timed(lambda: a @ b, 1)[0])
    return best, out, 2 * m * k * n / best_gemm


def bench_jacobian(dims=(256, 512, 1024), samples=64, styles=("llama", "gpt_neox"), threads=None, quick=False):
    """Print seconds per Jacobian: paper (autograd.functional.jacobian), vectorize=True, jacrev+vmap,
    ours (closed form, batched); ratios vs the paper; ours as a fraction of measured GEMM FLOP/s."""
    import torch

    from crosslayer.jacobians.autograd import block_jacobians_autograd, single_token_block_fn
    from crosslayer.jacobians.closed_form import (
        DEFAULT_CHUNK_BYTES,
        _bytes_per_sample,
        block_jacobians,
        closed_form_flops,
    )
    from crosslayer.linalg.conditioning import per_sample_stats_pair
    from crosslayer.models.adapters import adapter_for

    if threads:
        torch.set_num_threads(threads)
    print(f"single-token block Jacobians, seconds per Jacobian on {torch.get_num_threads()} threads "
          f"(ours: {samples} samples batched, best of 3; references on a few samples, see n)")
    print("x = speed-up vs the paper's method; GEMM = ours' FLOP/s / FLOP/s of a same-shaped float32 matmul timed in"
          " alternation with ours (best of 3 each);"
          " spectra / spec32 = per-sample statistics of J and J - I (norm, participation ratio, condition number)"
          " as the dynamics stage computes them (per_sample_stats_pair, torch path) in float64 / float32, s per"
          " operator (half a Jacobian's pair); RSS = process peak so far, MiB")
    print(f"{'layer':<9} {'d':>5} {'d_ff':>5} {'paper':>7} {'n':>2} {'vector':>7} {'x':>5} {'jacrev':>7} {'x':>5}"
          f" {'ours':>7} {'x':>6} {'GEMM':>5} {'err':>8} {'spectra':>7} {'spec32':>7} {'RSS':>6}")
    for style in styles:
        for d in dims:
            model = _jacobian_layer(style, d)
            adapter = adapter_for(model)
            block = adapter.blocks(model)[0]
            fn = single_token_block_fn(block, model)
            x = torch.randn(samples, d, generator=torch.Generator().manual_seed(1))
            # ours: includes reading the parts and the per-layer precompute
            parts = adapter.block_parts(block)
            chunk = min(samples, max(1, DEFAULT_CHUNK_BYTES // _bytes_per_sample(parts)))
            t_ours, J, gemm = _timed_with_gemm(lambda: block_jacobians(adapter.block_parts(block), x), d, parts.d_ff,
                                               chunk * d)
            rss = _peak_rss_mib()
            fraction = closed_form_flops(parts, samples) / t_ours / gemm
            n_paper = 1 if quick else (2 if d >= 512 else 3)
            t_paper, ref = _timed(lambda: block_jacobians_autograd(fn, x[:n_paper]), 1)
            err = float(torch.linalg.norm((J[:n_paper] - ref).flatten()) / torch.linalg.norm(ref.flatten()))
            n_ref = 2 if d >= 1024 or quick else 4
            t_vec, _ = _timed(lambda: block_jacobians_autograd(fn, x[:n_ref], method="vectorized"), 1)
            t_rev, _ = _timed(lambda: block_jacobians_autograd(fn, x[:n_ref], method="jacrev"), 1)
            per = (t_paper / n_paper, t_vec / n_ref, t_rev / n_ref, t_ours / samples)
            # the stage's other per-sample cost, J's and J - I's statistics in one call as the dynamics
            # stage makes it; J is a tensor, so this is the torch path on its device
            t_svd, _ = _timed(lambda: per_sample_stats_pair(J, dtype="float64"), 1)
            t_svd32, _ = _timed(lambda: per_sample_stats_pair(J, dtype="float32"), 1)
            rss = max(rss, _peak_rss_mib())
            print(f"{style:<9} {d:>5} {parts.d_ff:>5} {per[0]:>7.3f} {n_paper:>2}"
                  f" {per[1]:>7.3f} {per[0] / per[1]:>4.1f}x"
                  f" {per[2]:>7.3f} {per[0] / per[2]:>4.1f}x {per[3]:>7.4f} {per[0] / per[3]:>5.1f}x"
                  f" {fraction:>5.0%} {err:>8.1e} {t_svd / samples / 2:>7.4f} {t_svd32 / samples / 2:>7.4f} {rss:>6.0f}")
            model = block = fn = J = ref = None  # free before the next size (del would confuse pyflakes)


def bench_coupling(dims=(256, 512, 1024), tokens=(8, 32), styles=("llama", "gpt_neox"), threads=None,
                   released_rows=128, pairs=2):
    """Print seconds per layer and prompt: depth-wise J_TT (released row-by-row vs our cached
    sweep) with the SVD, and token-wise J_{t1 t2} (per-pair autograd vs one sweep per t2)."""
    import torch

    from crosslayer.jacobians.multi_token import last_token_jacobians, token_jacobians
    from crosslayer.linalg.topk import top_singular
    from crosslayer.models.adapters import adapter_for
    from crosslayer.models.blocks import block_calls

    if threads:
        torch.set_num_threads(threads)
    print(f"paper-002 Jacobians, seconds per layer and prompt on {torch.get_num_threads()} threads, one run each")
    print("released = one autograd.grad per row of the identity through the block on all T tokens (timed on "
          f"{released_rows} rows, scaled to d: the loop is linear in rows); ours = last token vs its cached context, "
          "attention through its query and new key/value, the rest in closed form, x2 for the coupling stage's two "
          "passes; svd = the released code's full SVD of J; top = ours, top-50 triplets "
          "(crosslayer.linalg.topk.top_singular); depth_x = (released + svd) / (2 ours + top); held_x = the same with "
          "the Jacobians held between the passes "
          f"(hold_bytes), i.e. / (ours / 2 + top). token-wise: autograd.functional.jacobian per pair (timed on {pairs} "
          "pairs, scaled to T(T+1)/2) vs one sweep per output token; err = relative Frobenius error vs the reference")
    print(f"{'layer':<9} {'d':>5} {'T':>3} {'released':>9} {'svd':>6} {'ours':>7} {'top':>6} {'depth_x':>8}"
          f" {'held_x':>7} {'err':>8} {'per-pair':>9} {'sweeps':>8} {'token_x':>8} {'err_tok':>8} {'RSS':>6}")
    for style in styles:
        for d in dims:
            model = _jacobian_layer(style, d)
            for T in tokens:
                ids = torch.randint(0, 8, (T,), generator=torch.Generator().manual_seed(T)).tolist()
                t_ours, ((_, J),) = _timed(lambda: list(last_token_jacobians(model, ids)), 2)
                call = block_calls(model, adapter_for(model).blocks(model), ids)[0]
                rows = min(d, released_rows)

                def released():
                    X = call.hidden.clone().requires_grad_(True)
                    with torch.enable_grad():
                        out = call(X)[-1]
                        return torch.stack([torch.autograd.grad(out[i], X, retain_graph=True)[0][-1]
                                            for i in range(rows)])

                t_rel, ref = _timed(released, 1)
                t_rel *= d / rows
                err = float(torch.linalg.norm(J[:rows] + torch.eye(d)[:rows] - ref) / torch.linalg.norm(ref))
                t_svd, _ = _timed(lambda: torch.linalg.svd(J, full_matrices=False), 2)
                t_top, _ = _timed(lambda: top_singular(J, min(50, d)), 2)
                t_sweep, found = _timed(lambda: dict(token_jacobians(model, ids, 0)), 1)
                picked = [(0, T - 1), (T // 2, T - 1)][:pairs]

                def per_pair():
                    out = []
                    for t1, t2 in picked:
                        def g(v, t1=t1, t2=t2):
                            X = torch.cat([call.hidden[:t1], v[None], call.hidden[t1 + 1 :]])
                            return call(X)[t2] - (v if t1 == t2 else 0)
                        out.append(torch.autograd.functional.jacobian(g, call.hidden[t1]))
                    return out

                t_pair, refs = _timed(per_pair, 1)
                t_pairs = t_pair / len(picked) * T * (T + 1) / 2
                err_tok = max(float(torch.linalg.norm(found[t2][t1] - r) / torch.linalg.norm(r))
                              for (t1, t2), r in zip(picked, refs))
                depth_x = (t_rel + t_svd) / (2 * t_ours + t_top)
                held_x = (t_rel + t_svd) / (t_ours + t_top)
                print(f"{style:<9} {d:>5} {T:>3} {t_rel:>9.3f} {t_svd:>6.3f} {2 * t_ours:>7.3f} {t_top:>6.3f}"
                      f" {depth_x:>7.1f}x {held_x:>6.1f}x"
                      f" {err:>8.1e} {t_pairs:>9.2f} {t_sweep:>8.3f} {t_pairs / t_sweep:>7.1f}x {err_tok:>8.1e}"
                      f" {_peak_rss_mib():>6.0f}")
            model = None


SCALE_STAGES = ("activations", "jacobians", "per_sample_stats", "spectra", "schur", "topology", "statistics")


def _synchronized(fn, device):
    """``fn`` followed by a CUDA synchronisation when timing GPU work."""
    def call():
        out = fn()
        if device == "cuda":
            import torch

            torch.cuda.synchronize()
        return out
    return call


def bench_scale(d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8, layers=2, samples=2, tokens=256, full_layers=32,
                full_samples=1000, checkpoints=3, device="cpu", threads=None, stages=SCALE_STAGES):
    """Paper-scale rehearsal of paper 004's pipeline on a random Llama-shaped stack (default:
    Llama-3.1-8B's layer): time every dynamics and topology stage on real shapes for a few layers
    and samples, each with the library call its job makes, and project to ``full_layers`` x
    ``full_samples`` x ``checkpoints``.

    Units: activations, Jacobians and per-sample statistics cost per (layer, sample); spectra and
    topology statistics per layer; Schur surgery per layer (two modes in one sweep, which share the
    Haar draws), composed from one Schur form, one Haar draw and one product update (plus the last
    layer's d x d SVDs, once per mode: ``schur_start``) because one layer alone takes half an hour
    at d = 4096; correlation graph and communities per snapshot (two per layer), measured on a
    synthetic ``full_samples`` x d snapshot with community structure (random weights' activations
    have none)."""
    import torch
    import transformers

    from crosslayer.dynamics.spectra import spectral_profile
    from crosslayer.dynamics.topology import checkpoint_communities, layer_statistics, snapshot_graphs
    from crosslayer.jacobians.closed_form import block_jacobians
    from crosslayer.linalg.conditioning import per_sample_stats_pair
    from crosslayer.models.adapters import adapter_for
    from crosslayer.models.residual import record_residual_stream
    from crosslayer.stats.communities import METHODS

    unknown = set(stages) - set(SCALE_STAGES)
    if unknown:
        raise ValueError(f"unknown stages {sorted(unknown)}: choose from {SCALE_STAGES}")
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=d_model, intermediate_size=d_ff,
                                      num_hidden_layers=layers, num_attention_heads=n_heads,
                                      num_key_value_heads=n_kv_heads, max_position_embeddings=max(tokens, 8))
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.float32).eval().to(device)
    adapter = adapter_for(model)
    rng = np.random.default_rng(0)
    token_ids = [rng.integers(0, config.vocab_size, tokens).tolist() for _ in range(samples)]
    rows = []  # (stage, what was measured, seconds, units measured, units in the full run)
    full = full_layers * full_samples

    def add(stage, what, seconds, units, full_units):
        rows.append((stage, what, seconds, units, full_units))
        print(f"  {stage}: {seconds:.2f} s ({what})", flush=True)

    print(f"paper-scale rehearsal: random Llama stack d={d_model}, d_ff={d_ff}, {n_heads}/{n_kv_heads} heads, "
          f"{layers} layers, {samples} samples of {tokens} tokens, on {device} with {torch.get_num_threads()} threads;"
          f" projected to {full_layers} layers x {full_samples} samples x {checkpoints} checkpoints", flush=True)
    acts = None
    if {"activations", "jacobians", "per_sample_stats", "spectra", "schur", "statistics"} & set(stages):
        t, recorded = _timed(_synchronized(lambda: record_residual_stream(model, token_ids, device=device), device), 1)
        acts = recorded["acts"]
        if "activations" in stages:
            add("activations", f"{layers} layers x {samples} samples, {tokens} tokens", t, layers * samples, full)
    blocks = adapter.blocks(model)
    means, first = [], None
    if {"jacobians", "per_sample_stats", "spectra", "schur", "statistics"} & set(stages):
        seconds = 0.0
        for layer, block in enumerate(blocks):
            parts = adapter.block_parts(block)
            x = torch.from_numpy(acts[:, 2 * layer]).to(device)
            t, J = _timed(_synchronized(lambda: block_jacobians(parts, x, layer=layer), device), 1)
            seconds += t
            means.append(J.double().mean(0).cpu().numpy())
            first = J[:2] if first is None else first  # two: the second runs as the rest of a layer's samples
        if "jacobians" in stages:
            add("jacobians", f"closed form, {layers} layers x {samples} samples", seconds, layers * samples, full)
    if "per_sample_stats" in stages:
        t, _ = _timed(_synchronized(lambda: per_sample_stats_pair(first), device), 1)
        add("per_sample_stats", f"J and J - I of {len(first)} sample(s), float64, with condition numbers", t,
            len(first), full)
    Js = np.stack(means) if means else None
    if "spectra" in stages:
        t, _ = _timed(lambda: spectral_profile(Js, rank=min(256, d_model), draws=1000), 1)
        add("spectra", f"{layers} mean Jacobians, rank 256, 1000 baseline draws", t, layers, full_layers)
    if "schur" in stages:
        _scale_schur(Js, d_model, rng, add, full_layers)
    memberships = None
    if {"topology", "statistics"} & set(stages):
        snapshot = _factor_snapshot(full_samples, d_model, rng)[:, None, :]
        t_graph, graphs = _timed(lambda: snapshot_graphs(snapshot), 1)
        t_comm, (memberships, participation, _) = _timed(lambda: checkpoint_communities(graphs), 1)
        if "topology" in stages:
            add("topology", f"one snapshot: correlation graph + {', '.join(METHODS)} x 3 seeds", t_graph + t_comm, 1,
                2 * full_layers)
    if "statistics" in stages:
        J0 = Js[:1]
        t, _ = _timed(lambda: layer_statistics(J0, np.repeat(memberships[0], 2, axis=0),
                                               np.repeat(participation[0], 2, axis=0)), 1)
        add("statistics", "one layer: mesoscale test (100 random partitions) + boundary coupling (5000 permutations)",
            t, 1, full_layers)
    _print_scale_table(rows, checkpoints, device)


def _scale_schur(Js, d_model, rng, add, full_layers):
    """Schur surgery at scale, composed from its parts (one of each): at d = 4096 a whole layer
    takes about 30 min on 2 cores."""
    from crosslayer.linalg.effective_rank import TORCH_MIN_WIDTH, SchurProduct, torch_of, triangle_svd
    from crosslayer.dynamics.surgery import DEFAULT_ALPHAS, SCHUR_MODES, _schur_triangle, haar_unitary, schur_parts

    draws, runs, rank = 4, len(DEFAULT_ALPHAS) * (1 + 2 * 4), min(256, d_model)  # the stage's defaults
    fast = d_model >= TORCH_MIN_WIDTH
    t_schur, (Q, D, N) = _timed(lambda: schur_parts(Js[0]), 1)
    t_haar, _ = _timed(lambda: haar_unitary(d_model, rng), 1)
    T = _schur_triangle(D, N, 0.5)
    Q, T = (torch_of(Q), torch_of(T)) if fast else (Q, T)
    product = SchurProduct(rank, fast)
    t_start, _ = _timed(lambda: product.start(triangle_svd(T, fast)), 1)  # the last layer: a d x d SVD
    t_basis, C = _timed(lambda: Q.conj().T @ Q, 1)  # per layer and chain of bases: a d x d x d product
    t_push, _ = _timed(lambda: product.push(C, T), 1)  # every other: two r x d x d products, r x d svdvals
    modes = len(SCHUR_MODES)  # one sweep for both: the Haar draws and their basis changes are shared
    add("schur", f"per layer, {modes} modes: {modes} Schur forms x {t_schur:.1f} s + {draws} Haar draws x "
        f"{t_haar:.1f} s + {modes + draws} basis changes x {t_basis:.2f} s + {modes * runs} product updates x "
        f"{t_push:.2f} s", modes * (t_schur + runs * t_push) + draws * t_haar + (modes + draws) * t_basis, 1,
        full_layers)
    starts = len(DEFAULT_ALPHAS) * (1 + draws)  # the dose's SVDs also start control B
    add("schur_start", f"per mode, the last layer: {starts} d x d SVDs x {t_start:.1f} s", starts * t_start, 1,
        len(SCHUR_MODES))


def _print_scale_table(rows, checkpoints, device):
    """The rehearsal's table: each stage's measured seconds, per unit, per checkpoint and over all."""
    import torch

    print(f"\n{'stage':<17} {'measured s':>10} {'units':>5} {'s / unit':>9} {'per checkpoint':>15}"
          f" {'x ' + str(checkpoints) + ' ckpts':>12}  measured on")
    total = 0.0
    for stage, what, seconds, units, full_units in rows:
        per_checkpoint = seconds / units * full_units
        total += per_checkpoint
        print(f"{stage:<17} {seconds:>10.3f} {units:>5} {seconds / units:>9.4g} {_hours(per_checkpoint):>15}"
              f" {_hours(per_checkpoint * checkpoints):>12}  {what}")
    print(f"{'total':<17} {'':>10} {'':>5} {'':>9} {_hours(total):>15} {_hours(total * checkpoints):>12}")
    print(f"peak RSS {_peak_rss_mib():.0f} MiB" + (f"; peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
                                                   if device == "cuda" else ""))
