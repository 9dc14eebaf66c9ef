"""The toy benchmark (bench/toy.py): its FLOP count against torch's own counter, and its timings."""

import torch
from torch.utils.flop_counter import FlopCounterMode

from bench.toy import bench_toy, step_flops
from crosslayer.continuity.toy import ToyConfig, ToyMLP


def test_step_flops_are_the_matrix_products_torch_counts_in_a_forward_and_backward_pass():
    for config in (ToyConfig(width=16, depth=3, batch_size=8), ToyConfig(width=32, depth=5, batch_size=4, residual=False)):
        model = ToyMLP(config, n_in=20, n_out=7)
        x, y = torch.randn(config.batch_size, 20), torch.randint(0, 7, (config.batch_size,))
        with FlopCounterMode(display=False) as counter:
            torch.nn.functional.cross_entropy(model(x), y).backward()
        assert step_flops(config, 20, 7) == counter.get_total_flops()


def test_the_benchmark_prints_a_row_per_run_and_device(capsys):
    bench_toy(grid=False, step_count=10)
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("cpu")]
    assert [row[1:3] for row in rows] == [["res_relu", "alone"], ["res_relu", "batch-3"], ["res_gelu", "alone"],
                                          ["res_gelu", "batch-3"]]
    for row in rows:  # ms per step, GFLOP/s, the GEMM rate and the share as numbers (their sizes are the machine's)
        float(row[3]), float(row[4]), float(row[5]), float(row[6].rstrip("%"))
    assert out.count("batched/alone speed") == 2
