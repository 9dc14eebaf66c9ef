"""The memory benchmark (bench/weights.py) on a synthetic Gemma-3-shaped checkpoint."""

from crosslayer.models.weights import open_checkpoint


def test_memory_benchmark_reads_a_gemma3_shaped_synthetic_checkpoint(tmp_path, capsys):
    """The synthetic Gemma-3-shaped checkpoint (heads wider than d / n_heads) reads through the
    adapter as written, and the memory benchmark runs on it (a small width here)."""
    from bench.common import write_synthetic_checkpoint
    from bench.weights import bench_memory

    shape = dict(d_model=48, d_ff=96, n_heads=4, n_kv_heads=2, head_dim=16)
    write_synthetic_checkpoint(tmp_path / "g3", n_layers=2, family="gemma3_text", **shape)
    with open_checkpoint(tmp_path / "g3") as reader:
        g = reader.geometry
        assert (g.model_type, g.d_model, g.d_ff, g.n_heads, g.n_kv_heads, g.head_dim) == ("gemma3_text", 48, 96, 4, 2, 16)
        w = reader.projections(1)
        assert w["q"].shape == (64, 48) and w["k"].shape == (32, 48) and w["o"].shape == (48, 64)
    bench_memory(family="gemma3_text", n_layers=2, d_model=48, d_ff=96, k=2, workdir=tmp_path / "bench")
    out = capsys.readouterr().out
    assert "synthetic gemma3_text checkpoint: d=48, d_ff=96, 2 layers" in out and "peak RSS in all" in out
