"""Paper 003's Fig. 13 run for real: the toy grid's runs on two more image sets, read from files in
torchvision's layout put there by hand (no download, no torchvision), then the table and figure."""

import numpy as np
import pandas as pd
import pytest
from image_files import N, write_cifar, write_idx_set
from snakemake_runs import TINY, overlay, snakemake

pytestmark = pytest.mark.workflow


def test_toy_runs_on_other_image_sets_from_their_files(tmp_path):
    sets = tmp_path / "sets"
    write_idx_set(sets, "fashion_mnist", (0, 10), gz=False)
    write_cifar(sets, "cifar100")
    datasets = overlay(tmp_path / "datasets.yaml", "toy: {seeds: [0], steps: 33, track: 1, datasets: {names: [fashion_mnist, "
                                                   f"cifar100], runs: [res_relu], directory: {sets}}}}}\n")
    targets = ["results/toy/datasets.tsv", "results/figures/toy/datasets.png", "results/figures/toy/datasets.pdf"]
    snakemake(tmp_path, *targets, "--cores", "2", "--configfile", str(TINY), datasets)
    table = pd.read_csv(tmp_path / "results/toy/datasets.tsv", sep="\t")
    assert table[["dataset", "run"]].values.tolist() == [["mnist", "res_relu"], ["fashion_mnist", "res_relu"],
                                                         ["cifar100", "res_relu"]]
    assert np.isfinite(table[["W.v1", "G.erank"]].to_numpy(float)).all()
    cifar = np.load(tmp_path / "results/toy/cifar100.npz")
    assert cifar["x_train"].shape == (N["train"], 3072) and cifar["y_train"].max() < 100
    log = (tmp_path / "logs/train_toy/cifar100/res_relu.log").read_text()
    assert "Traceback" not in log
