"""Paper-scale rehearsal (``python -m bench scale``): the heavy stages of every paper on a random
stack of an 8B model's layer shape (Llama-3.1-8B's by default; ``--family gpt_neox`` for
Pythia-6.9B's), built a few layers deep, each timed with the library call its job makes and
projected to one checkpoint of the paper's suite (config/suites/), then to ``--checkpoints``.
"""

import numpy as np
import yaml

from bench.common import ROOT, _gemm_rates, _hours, _peak_rss_mib, _timed, _timer
from bench.topology import _factor_snapshot

# each paper's stages, in the order they run
PAPER_STAGES = {
    "000": ("alignment",),
    "002": ("coupling_depth", "coupling_token"),
    "003": ("continuity",),
    "004": ("activations", "jacobians", "per_sample_stats", "spectra", "schur", "topology", "statistics"),
}
SCALE_STAGES = tuple(stage for stages in PAPER_STAGES.values() for stage in stages)

SHAPES = {  # --family: the layer shape of the 8B model of each family in the suites
    "llama": {"d_model": 4096, "d_ff": 14336, "heads": (32, 8)},  # Llama-3.1-8B
    "gpt_neox": {"d_model": 4096, "d_ff": 16384, "heads": (32, 32)},  # Pythia-6.9B
}


def _suite(name):
    return yaml.safe_load((ROOT / "config" / "suites" / f"{name}.yaml").read_text())


def coupling_suite_units():
    """(depth-wise prompts, token-wise prompts, tokens, layers) of the coupling suite: every
    dataset's prompts plus the chain-of-thought copies, and the token-wise layers of its pairs."""
    coupling = _suite("coupling")["coupling"]
    datasets = coupling["prompts"]["datasets"]
    cot = coupling["prompts"].get("cot", [])
    prompts = sum(d["n"] for d in datasets) + sum(d["n"] for d in datasets if d["label"] in cot)
    token_wise = coupling["token_wise"]
    layers = len({layer for pair in token_wise["layer_pairs"] for layer in pair})
    return prompts, token_wise["prompts"], token_wise["tokens"], layers


def _model(family, d_model, d_ff, n_heads, n_kv_heads, layers, tokens, device):
    import torch
    import transformers

    torch.manual_seed(0)
    common = {"vocab_size": 256, "hidden_size": d_model, "intermediate_size": d_ff, "num_hidden_layers": layers,
              "num_attention_heads": n_heads, "max_position_embeddings": max(tokens, 8)}
    if family == "llama":
        config = transformers.LlamaConfig(num_key_value_heads=n_kv_heads, **common)
    else:
        config = transformers.GPTNeoXConfig(use_parallel_residual=True, hidden_act="gelu", **common)
    return transformers.AutoModelForCausalLM.from_config(config).to(torch.float32).eval().to(device)


def bench_scale(family="llama", d_model=None, d_ff=None, n_heads=None, n_kv_heads=None, layers=2, samples=2,
                tokens=256, prompt_tokens=64, full_layers=32, full_samples=1000, checkpoints=3, device="cpu",
                threads=None, stages=SCALE_STAGES, workers=1):
    """Time each stage in `stages` on real shapes for a few layers, samples and prompts, and print
    one table: seconds per unit, per checkpoint of the paper's suite, and over `checkpoints`.

    Units per checkpoint: paper 004's activations, Jacobians and per-sample statistics per (layer,
    sample), ``full_layers x full_samples``; its spectra, Schur surgery and statistics per layer,
    topology per snapshot (two per layer). Paper 002: depth-wise Jacobians of every layer with
    their top-50 triplets per prompt of ``prompt_tokens`` tokens (the coupling suite's prompts),
    token-wise Jacobians per (layer, prompt) of the suite's token-wise settings. Paper 003: the
    eight projections' SVDs per layer. Paper 000: the MLP product and its top-10 subspaces per
    layer. The per-sample statistics are timed on both condition-number routes; the one the device
    takes counts, the other is printed beside it. The Schur forms run in `workers` processes (as
    ``dynamics.schur.workers``) and the rest of the surgery on `device`."""
    import torch

    unknown = set(stages) - set(SCALE_STAGES)
    if unknown:
        raise ValueError(f"unknown stages {sorted(unknown)}: choose from {SCALE_STAGES}")
    shape = SHAPES[family]
    d_model, d_ff = d_model or shape["d_model"], d_ff or shape["d_ff"]
    n_heads, n_kv_heads = (n_heads, n_kv_heads) if n_heads else shape["heads"]
    if threads:
        torch.set_num_threads(threads)
    model = _model(family, d_model, d_ff, n_heads, n_kv_heads, layers, max(tokens, prompt_tokens), device)
    rates = _gemm_rates(device)
    print(f"paper-scale rehearsal: random {family} stack d={d_model}, d_ff={d_ff}, {n_heads}/{n_kv_heads} heads, "
          f"{layers} layers, on {device} with {torch.get_num_threads()} threads; matrix products "
          f"{rates['float32'] / 1e12:.2f} TFLOP/s float32, {rates['float64'] / 1e12:.2f} float64", flush=True)
    rows = []  # (paper, stage, what was measured, seconds, units measured, units per checkpoint, counted)

    def add(paper, stage, what, seconds, units, full_units, counted=True):
        rows.append((paper, stage, what, seconds, units, full_units, counted))
        print(f"  {stage}: {seconds:.2f} s ({what})", flush=True)

    context = {"model": model, "device": device, "time": _timer(device), "add": add, "layers": layers,
               "full_layers": full_layers, "rng": np.random.default_rng(0), "rates": rates,
               "threads": torch.get_num_threads(), "workers": workers}
    _weights_papers(context, {"alignment"} & set(stages), n_heads, n_kv_heads)  # the papers in order
    if {"coupling_depth", "coupling_token"} & set(stages):
        default = model.config._attn_implementation
        model.set_attn_implementation("eager")  # as the coupling stage loads models (autograd through attention)
        _paper_002(context, stages, prompt_tokens)
        model.set_attn_implementation(default)
    _weights_papers(context, {"continuity"} & set(stages), n_heads, n_kv_heads)
    if set(PAPER_STAGES["004"]) & set(stages):
        _paper_004(context, stages, samples, tokens, full_samples)
    _print_table(rows, checkpoints, device)


def _weights_papers(context, stages, n_heads, n_kv_heads):
    """Papers 000 and 003, per layer, from the live model's weights."""
    import torch

    from crosslayer.alignment.measure import mlp_alignment
    from crosslayer.continuity.measure import ov_composite, projection_continuity

    from crosslayer.models.adapters import adapter_for

    model, time, add, layers = context["model"], context["time"], context["add"], context["layers"]
    blocks = adapter_for(model).blocks(model)
    neox = hasattr(blocks[0], "attention")

    def projections(layer):
        block = blocks[layer]
        if neox:  # fused QKV, interleaved per head
            qkv = block.attention.query_key_value.weight.view(n_heads, 3, -1, block.attention.dense.weight.shape[0])
            q, k, v = (qkv[:, i].reshape(-1, qkv.shape[-1]) for i in range(3))
            o, up, down, gate = block.attention.dense.weight, block.mlp.dense_h_to_4h.weight, \
                block.mlp.dense_4h_to_h.weight, None
        else:
            attn, mlp = block.self_attn, block.mlp
            q, k, v, o = attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, attn.o_proj.weight
            up, down, gate = mlp.up_proj.weight, mlp.down_proj.weight, mlp.gate_proj.weight
        weights = {"q": q, "k": k, "v": v, "o": o, "up": up, "down": down,
                   "ov": ov_composite(o, v, n_heads=n_heads, n_kv_heads=n_kv_heads)}
        return weights | ({"gate": gate} if gate is not None else {})

    with torch.no_grad():
        if "alignment" in stages:
            def mlp(layer):
                weights = projections(layer)
                return weights["up"], weights["down"]
            t, _ = time(lambda: mlp_alignment(mlp, layers, device=context["device"]))
            add("000", "alignment", f"{layers} layers: W_down W_up on the device, top-10 subspaces (ARPACK, CPU)", t,
                layers, context["full_layers"])
        if "continuity" in stages:
            t, _ = time(lambda: projection_continuity(projections, layers, device=context["device"]))
            add("003", "continuity", f"{layers} layers x {len(projections(0))} projections, float32 SVDs", t, layers,
                context["full_layers"])


def _paper_002(context, stages, prompt_tokens):
    """Paper 002: depth-wise Jacobians of every layer with their top-50 triplets, and token-wise."""
    from crosslayer.jacobians.multi_token import last_token_jacobians, token_jacobians
    from crosslayer.linalg.topk import top_singular

    model, time, add, layers = context["model"], context["time"], context["add"], context["layers"]
    prompts, tw_prompts, tw_tokens, tw_layers = coupling_suite_units()
    ids = context["rng"].integers(0, 256, prompt_tokens).tolist()
    if "coupling_depth" in stages:
        def depth():
            return [top_singular(J, 50) for _, J in last_token_jacobians(model, ids)]
        t, _ = time(depth)
        add("002", "coupling_depth", f"one prompt of {prompt_tokens} tokens: J_TT of {layers} layers + top-50 "
            f"triplets each (per layer; the suite: {prompts} prompts)", t, layers, prompts * context["full_layers"])
    if "coupling_token" in stages:
        short = context["rng"].integers(0, 256, tw_tokens).tolist()
        t, _ = time(lambda: [J.shape for _, J in token_jacobians(model, short, 0)])
        add("002", "coupling_token", f"one layer and prompt of {tw_tokens} tokens, all t1 <= t2 (the suite: "
            f"{tw_prompts} prompts x {tw_layers} layers)", t, 1, tw_prompts * tw_layers)


def _paper_004(context, stages, samples, tokens, full_samples):
    """Paper 004's dynamics and topology stages (one checkpoint's worth, per unit)."""
    import torch

    from crosslayer.dynamics.spectra import spectral_profile
    from crosslayer.dynamics.topology import checkpoint_communities, layer_statistics, snapshot_graphs
    from crosslayer.jacobians.closed_form import block_jacobians
    from crosslayer.models.adapters import adapter_for
    from crosslayer.models.residual import record_residual_stream
    from crosslayer.stats.communities import METHODS

    model, device, time, add, layers = (context[k] for k in ("model", "device", "time", "add", "layers"))
    full_layers, rng = context["full_layers"], context["rng"]
    full = full_layers * full_samples
    adapter = adapter_for(model)
    token_ids = [rng.integers(0, 256, tokens).tolist() for _ in range(samples)]
    acts = None
    if {"activations", "jacobians", "per_sample_stats", "spectra", "schur", "statistics"} & set(stages):
        t, recorded = time(lambda: record_residual_stream(model, token_ids, device=device))
        acts = recorded["acts"]
        if "activations" in stages:
            params = sum(p.numel() for block in adapter.blocks(model) for p in block.parameters())
            flops = 2 * params * tokens * samples  # the blocks' matrix products; attention's T^2 terms aside
            add("004", "activations", f"{layers} layers x {samples} samples of {tokens} tokens, "
                f"{flops / t / context['rates']['float32']:.0%} of the float32 product rate", t, layers * samples, full)
    means, first = [], None
    if {"jacobians", "per_sample_stats", "spectra", "schur", "statistics"} & set(stages):
        seconds = 0.0
        for layer, block in enumerate(adapter.blocks(model)):
            parts = adapter.block_parts(block)
            x = torch.from_numpy(acts[:, 2 * layer]).to(device)
            t, J = time(lambda: block_jacobians(parts, x, layer=layer))
            seconds += t
            means.append(J.double().mean(0).cpu().numpy())
            first = J if first is None else first
        if "jacobians" in stages:
            add("004", "jacobians", f"closed form, {layers} layers x {samples} samples", seconds, layers * samples,
                full)
    if "per_sample_stats" in stages:
        _per_sample_stats(first, add, time, full)
    Js = np.stack(means) if means else None
    if "spectra" in stages:
        t, _ = _timed(lambda: spectral_profile(Js, rank=min(256, Js.shape[-1]), draws=1000), 1)
        add("004", "spectra", f"{layers} mean Jacobians, rank 256, 1000 baseline draws", t, layers, full_layers)
    if "schur" in stages:
        _schur(Js, context, context["workers"])
    memberships = None
    if {"topology", "statistics"} & set(stages):
        snapshot = _factor_snapshot(full_samples, model.config.hidden_size, rng)[:, None, :]
        t_graph, graphs = _timed(lambda: snapshot_graphs(snapshot), 1)
        t_comm, (memberships, participation, _) = _timed(lambda: checkpoint_communities(graphs), 1)
        if "topology" in stages:
            add("004", "topology", f"one snapshot: correlation graph + {', '.join(METHODS)} x 3 seeds",
                t_graph + t_comm, 1, 2 * full_layers)
    if "statistics" in stages:
        t, _ = _timed(lambda: layer_statistics(Js[:1], np.repeat(memberships[0], 2, axis=0),
                                               np.repeat(participation[0], 2, axis=0)), 1)
        add("004", "statistics", "one layer: mesoscale test (100 random partitions) + boundary coupling (5000 "
            "permutations)", t, 1, full_layers)


def _per_sample_stats(J, add, time, full):
    """J and J - I of one layer's samples on both condition-number routes: the device's counts."""
    from crosslayer.linalg import conditioning

    device = J.device.type
    default = conditioning.BATCHED_DEVICES
    other = () if device in default else (device,)
    kappas = {}
    for name, routes in (("per_sample_stats", default), ("per_sample_other", other)):
        conditioning.BATCHED_DEVICES = routes
        try:
            t, stats = time(lambda: conditioning.per_sample_stats_pair(J))
        finally:
            conditioning.BATCHED_DEVICES = default
        kappas[name] = np.concatenate([stats["condition_number"], stats["condition_number_res"]])
        route = "batched Krylov" if device in routes else "per matrix"
        add("004", name, f"J and J - I of {len(J)} samples, float64, condition numbers {route}"
            + ("" if name == "per_sample_stats" else ", not counted"), t, len(J), full, name == "per_sample_stats")
    difference = np.max(np.abs(kappas["per_sample_other"] / kappas["per_sample_stats"] - 1))
    print(f"  the two routes' condition numbers differ by at most {difference:.1e} relative", flush=True)
    if device == "cuda":  # the faster precision a user may choose (per_sample_dtype: float32), and its error
        t, single = time(lambda: conditioning.per_sample_stats_pair(J, dtype="float32"))
        errors = {name: float(np.max(np.abs(single[name] / stats[name] - 1))) for name in single
                  if not name.startswith("condition_path")}
        add("004", "per_sample_f32", f"the same in float32 (per_sample_dtype), not counted; relative error vs float64: "
            + ", ".join(f"{name} {error:.1e}" for name, error in errors.items()), t, len(J), full, False)


def _schur(Js, context, workers):
    """Schur surgery at scale, composed from its parts, each timed where the stage runs it: the
    Schur forms on the CPU (``workers`` processes, as ``dynamics.schur.workers``), the rest (Haar
    draws, basis changes, product updates, the last layer's start SVDs) on the device. With
    workers > 1 the forms overlap the device's work, so a layer costs the larger of the two; at
    d = 4096 a whole layer on 2 CPU cores takes about 30 min."""
    from crosslayer.dynamics.surgery import DEFAULT_ALPHAS, SCHUR_MODES, _schur_forms, _schur_triangle, haar_unitary
    from crosslayer.linalg.effective_rank import SchurProduct, torch_of, triangle_svd

    add, time, device, rng = context["add"], context["time"], context["device"], context["rng"]
    d_model, modes = Js.shape[-1], len(SCHUR_MODES)
    draws, runs, rank = 4, len(DEFAULT_ALPHAS) * (1 + 2 * 4), min(256, d_model)  # the stage's defaults
    stack = np.repeat(Js[:1], max(workers, 1), axis=0)  # one layer per worker: their throughput
    t_forms, forms = _timed(lambda: list(_schur_forms(stack, SCHUR_MODES, workers, context["threads"])), 1)
    t_forms /= len(stack)
    Q, D, N = (torch_of(x).to(device) for x in forms[0][1]["J"])
    t_haar, _ = time(lambda: haar_unitary(d_model, rng, None if device == "cpu" else device))  # the stage's call
    T = _schur_triangle(D, N, 0.5)
    product = SchurProduct(rank, True)
    t_start, _ = time(lambda: product.start(triangle_svd(T, True)))  # the last layer: a d x d SVD
    t_basis, C = time(lambda: Q.conj().T @ Q)  # per layer and chain of bases: a d x d x d product
    t_push, _ = time(lambda: product.push(C, T))  # every other: two r x d x d products, r x d svdvals
    on_device = draws * t_haar + (modes + draws) * t_basis + modes * runs * t_push
    per_layer = max(t_forms, on_device) if workers > 1 else t_forms + on_device
    add("004", "schur", f"per layer, {modes} modes: Schur forms {t_forms:.1f} s ({workers} worker(s), CPU)"
        f" {'beside' if workers > 1 else '+'} {draws} Haar draws x {t_haar:.2f} s + {modes + draws} basis changes x"
        f" {t_basis:.3f} s + {modes * runs} product updates x {t_push:.3f} s ({device})", per_layer, 1,
        context["full_layers"])
    starts = len(DEFAULT_ALPHAS) * (1 + draws)  # the dose's SVDs also start control B
    add("004", "schur_start", f"per mode, the last layer: {starts} d x d SVDs x {t_start:.2f} s ({device})",
        starts * t_start, 1, len(SCHUR_MODES))


def _print_table(rows, checkpoints, device):
    """Each stage's measured seconds, per unit, per checkpoint of its suite and over `checkpoints`;
    a total per paper and over all."""
    import torch

    print(f"\n{'stage':<17} {'paper':>5} {'measured s':>10} {'units':>5} {'s / unit':>9} {'per checkpoint':>15}"
          f" {'x ' + str(checkpoints) + ' ckpts':>12}  measured on")
    totals = {}
    for paper, stage, what, seconds, units, full_units, counted in rows:
        per_checkpoint = seconds / units * full_units
        if counted:
            totals[paper] = totals.get(paper, 0.0) + per_checkpoint
        print(f"{stage:<17} {paper:>5} {seconds:>10.3f} {units:>5} {seconds / units:>9.4g} {_hours(per_checkpoint):>15}"
              f" {_hours(per_checkpoint * checkpoints):>12}  {what}")
    for paper, total in sorted(totals.items()):
        print(f"{'total_' + paper:<17} {paper:>5} {'':>10} {'':>5} {'':>9} {_hours(total):>15}"
              f" {_hours(total * checkpoints):>12}")
    print(f"peak RSS {_peak_rss_mib():.0f} MiB" + (f"; peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
                                                   if device == "cuda" else ""))
