"""Benchmarks of the weight analyses and the whole run.
"""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import ROOT, _measure, _mlp_weights, _timed, write_synthetic_checkpoint
from crosslayer.linalg.subspace import subspace_overlap, top_singular_subspaces


def bench_svd(dims=(1024, 2048), k=10, repeat=3, threads=None):
    """Print seconds per layer: product, ARPACK top-k, full SVD; and top-k accuracy."""
    import torch

    from crosslayer.alignment.measure import mlp_product

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


#: Shapes of the memory benchmark's synthetic checkpoints (n_layers aside): a GPT-NeoX of 1.4B's
#: width and Gemma-3-12B's text decoder.
MEMORY_SHAPES = {
    "gpt_neox": dict(d_model=2048, d_ff=8192, n_heads=16),
    "gemma3_text": dict(d_model=3840, d_ff=15360, n_heads=16, n_kv_heads=8, head_dim=256),
}


def bench_memory(d_model=None, n_layers=24, d_ff=None, n_heads=None, k=10, threads=2, workdir=None,
                 family="gpt_neox"):
    """Print the peak RSS of the ``mlp_alignment`` job (``measure_checkpoint``) on a synthetic checkpoint vs the
    formula."""
    shape = {**MEMORY_SHAPES[family], **{key: value for key, value in
                                         (("d_model", d_model), ("d_ff", d_ff), ("n_heads", n_heads)) if value}}
    d_model, d_ff = shape["d_model"], shape["d_ff"]
    tmp = Path(workdir or tempfile.mkdtemp(prefix="crosslayer-bench-"))
    try:
        ckpt = write_synthetic_checkpoint(tmp / "ckpt", n_layers=n_layers, family=family, **shape)
        size = sum(f.stat().st_size for f in ckpt.iterdir()) / 2**20
        measured = _measure(ckpt, threads,
                            "from crosslayer.alignment.measure import AlignmentSettings, measure_checkpoint",
                            f"measure_checkpoint(manifest, AlignmentSettings(k={k}))")
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
        measured = _measure(ckpt, threads, "from crosslayer.continuity.measure import PROJECTIONS, measure_checkpoint\n"
                            "from crosslayer.continuity.statistics import checkpoint_summary",
                            f"checkpoint_summary(measure_checkpoint(manifest, device={device!r}), "
                            f"projections=PROJECTIONS, n_components={min(3, n_layers - 1)}, draws=1000)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mib = {key: value / 1024 for key, value in measured.items() if key != "seconds"}
    print(f"whole stage on a synthetic Llama checkpoint: d={d_model}, d_ff={d_ff}, {n_heads}/{n_kv_heads} heads, "
          f"{n_layers} layers, {size:.0f} MiB on disk: {measured['seconds']:.1f} s ({measured['seconds'] / n_layers:.1f} s "
          f"per layer; {measured['seconds'] / n_layers * full_layers / 60:.1f} min projected to {full_layers} layers)")
    print(f"anonymous memory: {mib['anon_after_imports']:.0f} MiB after imports, peak {mib['peak_anon']:.0f} MiB; "
          f"peak RSS {mib['peak_rss']:.0f} MiB")


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
