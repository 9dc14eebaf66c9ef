"""Shared by the benchmarks: timing, synthetic checkpoints of a given shape, the peak memory of an
analysis run in a child process.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]  # bench/ sits at the repository root


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
from crosslayer.models.weights import open_checkpoint
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


def _peak_rss_mib():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _hours(seconds):
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _timer(device, repeat=1):
    """``time(fn) -> (seconds, out)``, the best of `repeat` calls: on CUDA a warm-up call first
    (library loading, kernel selection) and a synchronisation before the clock stops."""
    import torch

    def time(fn):
        if device == "cuda":
            fn()
            torch.cuda.synchronize()

        def call():
            out = fn()
            if device == "cuda":
                torch.cuda.synchronize()
            return out
        return _timed(call, repeat)
    return time


def _gemm_rates(device, n=4096, dtypes=("float32", "float64"), repeat=1):
    """Measured matrix-product rates (FLOP/s) of an `n` cube on `device`, per dtype name (the
    best of `repeat` products)."""
    import torch

    time, rates = _timer(device, repeat), {}
    for dtype in (getattr(torch, name) for name in dtypes):
        a = torch.randn(n, n, device=device, dtype=dtype)
        seconds, _ = time(lambda: a @ a)
        rates[str(dtype).removeprefix("torch.")] = 2 * n**3 / seconds
    return rates
