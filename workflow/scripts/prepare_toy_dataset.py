from _setup import start

start(snakemake)

import numpy as np

from crosslayer.data.image_sets import download_image_set, load_image_set

name, directory = snakemake.wildcards.image_set, snakemake.params.directory
download_image_set(name, directory)  # nothing to do where the files are already there
x_train, y_train, x_test, y_test = load_image_set(name, directory)
np.savez(snakemake.output.npz, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
