from _setup import start

start(snakemake)

import numpy as np

from crosslayer.data.mnist import load_mnist

params = snakemake.params
# the settings of the selected source only (config.mnist_params)
x_train, y_train, x_test, y_test = load_mnist(**params.data)
np.savez(snakemake.output.npz, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
