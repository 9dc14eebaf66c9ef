from _setup import start

start(snakemake)

import numpy as np

from crosslayer.data.mnist import load_mnist

params = snakemake.params
split = {"test_fraction": params.test_fraction, "seed": params.seed} if params.source == "package" else {}
x_train, y_train, x_test, y_test = load_mnist(params.source, directory=params.get("directory"), **split)
np.savez(snakemake.output.npz, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
