"""Small image-set files in each set's own format and torchvision's folder layout (paper 003's
Fig. 13 sets, crosslayer.data.image_sets.FILES): for the readers' tests and a real toy run."""

import gzip
import pickle

import numpy as np
from scipy.io import savemat

from crosslayer.data.image_sets import FILES

N = {"train": 12, "test": 5}


def _idx(array):
    """IDX bytes of a uint8 array: magic 0x0000080<ndim>, big-endian sizes, the bytes."""
    return bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape) + array.tobytes()


def write_idx_set(root, name, labels, gz):
    """Images (n, 28, 28) and labels drawn per split into the set's two IDX files (gzipped with `gz`)."""
    rng, written = np.random.default_rng(1), {}
    for split, (images_path, labels_path) in FILES[name].items():
        x = rng.integers(0, 256, (N[split], 28, 28), dtype=np.uint8)
        y = rng.integers(*labels, N[split], dtype=np.uint8)
        for path, array in ((images_path, x), (labels_path, y)):
            target = root / (path + ".gz" if gz else path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(gzip.compress(_idx(array)) if gz else _idx(array))
        written[split] = x, y
    return written


def write_svhn(root):
    """``{split}_32x32.mat``: X (32, 32, 3, n) uint8 and y (n, 1) with 10 for the digit 0."""
    rng, written = np.random.default_rng(2), {}
    for split in ("train", "test"):
        X = rng.integers(0, 256, (32, 32, 3, N[split]), dtype=np.uint8)
        y = rng.integers(1, 11, (N[split], 1), dtype=np.uint8)
        y[0] = 10
        savemat(root / f"{split}_32x32.mat", {"X": X, "y": y})
        written[split] = X, y
    return written


def write_cifar(root, name):
    """The python batches: dicts of ``data`` (n, 3072) uint8 and ``labels`` (CIFAR-100: ``fine_labels``
    and ``coarse_labels``), pickled with protocol 2 as the distributed (Python 2) files are, and the
    meta file torchvision reads for the class names."""
    rng, written = np.random.default_rng(3), {}
    n_classes, key = (100, "fine_labels") if name == "cifar100" else (10, "labels")
    for split, paths in FILES[name].items():
        xs, ys = [], []
        for path in paths:
            x = rng.integers(0, 256, (N[split], 3072), dtype=np.uint8)
            y = rng.integers(0, n_classes, N[split]).tolist()
            entry = {"batch_label": "testing", "data": x, key: y}
            if name == "cifar100":
                entry["coarse_labels"] = [label // 5 for label in y]
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(pickle.dumps(entry, protocol=2))
            xs.append(x), ys.append(y)
        written[split] = np.concatenate(xs), np.concatenate(ys)
    folder = root / FILES[name]["train"][0].split("/")[0]
    meta = {"fine_label_names": [f"c{i}" for i in range(100)]} if name == "cifar100" else \
        {"label_names": [f"c{i}" for i in range(10)]}
    (folder / ("meta" if name == "cifar100" else "batches.meta")).write_bytes(pickle.dumps(meta, protocol=2))
    return written
