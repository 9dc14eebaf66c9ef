"""Paper 003's toy grid: seconds per Adam step of one run, the share of the matrix-product rate it
reaches, the tracking cost, and the grid through Snakemake."""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, _gemm_rates, _timed


def step_flops(config, n_in, n_out):
    """Matrix-product FLOPs of one Adam step (forward and backward) of the toy at batch B: each D x D
    layer and the head three products (forward, input and weight gradients), the embedding two (no
    gradient for the pixels)."""
    B, D = config.batch_size, config.width
    return 2 * B * D * (3 * config.depth * D + 2 * n_in + 3 * n_out)


def step_seconds(config, data, device, steps=200, seeds=None):
    """Seconds per Adam step of one seed (tracking accumulations included, the tracked rows' SVDs
    not): the difference of a run of 2 * `steps` and one of `steps`, each tracked once; of
    :func:`train_toy`, or with `seeds` of :func:`train_toy_seeds` (all batched) divided by their count."""
    from dataclasses import replace

    from crosslayer.continuity.toy import train_toy
    from crosslayer.continuity.toy_batched import train_toy_seeds

    def run(n):
        short = replace(config, steps=n, track=1)
        return train_toy(short, data, device=device) if seeds is None else train_toy_seeds(short, seeds, data,
                                                                                            device=device)

    short, _ = _timed(lambda: run(steps), 3)
    long, _ = _timed(lambda: run(2 * steps), 3)
    return (long - short) / steps / (1 if seeds is None else len(seeds))


def bench_toy(cores=2, seeds=(0, 1, 2), steps=938, track=10, grid=True, step_count=200):
    """Per device (the CPU on one thread, and CUDA where there is one): seconds per Adam step of
    one seed of a Res+ReLU and a Res+GELU run, alone and with `seeds` batched, their matrix-product
    FLOP/s against the device's float32 GEMM rate, and one tracked row's cost; then the Table 1
    grid (the default's 11 runs) x `seeds` at `steps` through Snakemake on `cores`, and the
    projection to the paper's 9,380 steps. The step time is the difference of runs of
    2 * `step_count` and `step_count` steps."""
    import torch

    from crosslayer.continuity.toy import ToyConfig, _row, as_tensors
    from crosslayer.data.mnist import load_mnist

    torch.set_num_threads(1)
    data = as_tensors(dict(zip(("x_train", "y_train", "x_test", "y_test"), load_mnist("package"))))
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"{'device':<6} {'run':<9} {'seeds':<10} {'ms/step':>8} {'GFLOP/s':>8} {'GEMM GFLOP/s':>13} {'share':>6} "
          f"{'row ms':>7}")
    per_step = {}
    for device in devices:
        gemm = _gemm_rates(device, n=1024, dtypes=("float32",), repeat=5)["float32"]
        for activation in ("relu", "gelu"):
            config = ToyConfig(activation=activation)
            stacks = {name: torch.randn(config.depth, config.width, config.width, device=device)
                      for name in ("W", "G", "Gcum", *(f"ema{b:g}" for b in config.ema_betas))}
            row, _ = _timed(lambda: _row(stacks, 2), 3)
            for batched in (None, seeds):
                seconds = step_seconds(config, data, device, steps=step_count, seeds=batched)
                per_step[device, activation, batched] = seconds
                rate = step_flops(config, data[0].shape[1], 10) / seconds
                mode = "alone" if batched is None else f"batch-{len(seeds)}"
                print(f"{device:<6} {'res_' + activation:<9} {mode:<10} {seconds * 1e3:>8.2f} {rate / 1e9:>8.1f} "
                      f"{gemm / 1e9:>13.1f} {rate / gemm:>6.0%} {row * 1e3:>7.0f}")
            print(f"{'':<6} {'':<9} batched/alone speed: "
                  f"{per_step[device, activation, None] / per_step[device, activation, seeds]:.2f}x")
    if grid:
        _grid(cores, seeds, steps, track, per_step["cpu", "relu", None])


def _grid(cores, seeds, steps, track, step_s):
    import yaml

    runs = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["toy"]["runs"]
    tmp = Path(tempfile.mkdtemp(prefix="crosslayer-toy-"))
    try:
        overlay = tmp / "toy.yaml"
        overlay.write_text(yaml.safe_dump({"toy": {"activate": True, "data": {"source": "package"}, "seeds": list(seeds),
                                                   "steps": steps, "track": track, "threads": 1, "runs": runs}}))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp),
                        "results/toy/final.tsv", "--cores", str(cores), "--configfile",
                        str(ROOT / "config" / "config.yaml"), str(overlay)], check=True, capture_output=True)
        wall = time.perf_counter() - start
        jobs = [float(path.read_text().splitlines()[1].split("\t")[0])
                for path in (tmp / "benchmarks" / "train_toy").rglob("*.tsv")]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"Table 1 grid: {len(runs)} runs x {len(seeds)} seeds x {steps} Adam steps ({track} rows), {cores} cores: "
          f"{wall:.0f} s wall; {len(jobs)} train_toy jobs of {min(jobs):.1f}-{max(jobs):.1f} s, {sum(jobs):.0f} job-s")
    paper = 9380 * step_s * len(runs) * len(seeds)
    print(f"at the paper's 9,380 steps: {9380 * step_s:.0f} s of Res+ReLU steps per seed; the grid "
          f"{paper / cores / 60:.0f} min of steps on {cores} cores (plus 20 rows a seed)")
