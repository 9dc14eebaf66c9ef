"""The five other image classification sets of paper 003's Fig. 13 (appendix F): EMNIST-Letters,
Fashion-MNIST, SVHN, CIFAR-10 and CIFAR-100, with their standard train / test splits.

torchvision downloads them (:func:`download_image_set`, in a localrule); :func:`load_image_set` then
reads the files torchvision leaves in its download root, in torchvision's own folder layout
(:data:`FILES`), without torchvision: a directory filled by hand works on a machine without it.
Images come back flattened, uint8: 784 columns for the grey sets, 3072 for the colour ones, in
channel, row, column order (CIFAR's own order; SVHN's (row, column, channel, image) array is
turned to it). Labels are 0-based class ids.

No checksum is checked here: torchvision checks the archives it downloads; the readers check the
shapes and the label ranges.
"""

import pickle
from pathlib import Path

import numpy as np

from crosslayer.data.mnist import read_idx

__all__ = ["IMAGE_SETS", "FILES", "N_CLASSES", "download_image_set", "load_image_set", "missing_files"]

#: Image set -> (torchvision class, its extra arguments).
TORCHVISION = {
    "emnist_letters": ("EMNIST", {"split": "letters"}),
    "fashion_mnist": ("FashionMNIST", {}),
    "svhn": ("SVHN", {}),
    "cifar10": ("CIFAR10", {}),
    "cifar100": ("CIFAR100", {}),
}
IMAGE_SETS = tuple(TORCHVISION)
N_CLASSES = {"emnist_letters": 26, "fashion_mnist": 10, "svhn": 10, "cifar10": 10, "cifar100": 100}

_EMNIST = "EMNIST/raw/emnist-letters-{split}-{what}-idx{dim}-ubyte"
_FASHION = "FashionMNIST/raw/{split}-{what}-idx{dim}-ubyte"
#: Image set -> split -> the files it is read from, relative to the download root (IDX files
#: uncompressed as torchvision extracts them, or gzipped with .gz added).
FILES = {
    "emnist_letters": {split: [_EMNIST.format(split=split, what="images", dim=3),
                               _EMNIST.format(split=split, what="labels", dim=1)] for split in ("train", "test")},
    "fashion_mnist": {split: [_FASHION.format(split=stem, what="images", dim=3),
                              _FASHION.format(split=stem, what="labels", dim=1)]
                      for split, stem in (("train", "train"), ("test", "t10k"))},
    "svhn": {"train": ["train_32x32.mat"], "test": ["test_32x32.mat"]},
    "cifar10": {"train": [f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)],
                "test": ["cifar-10-batches-py/test_batch"]},
    "cifar100": {"train": ["cifar-100-python/train"], "test": ["cifar-100-python/test"]},
}


def _file_list(name):
    return ", ".join(path for paths in FILES[name].values() for path in paths)


def _check_name(name):
    if name not in TORCHVISION:
        raise ValueError(f"unknown image set {name!r}; choose from {IMAGE_SETS}")


def download_image_set(name, directory):
    """Download both splits of image set `name` with torchvision into `directory` (its download
    root); files already there are kept. A failure says which files to put where instead."""
    _check_name(name)
    if not missing_files(name, directory):
        return  # present (downloaded before, or put there by hand): torchvision is not needed
    try:
        import torchvision.datasets
    except ModuleNotFoundError:
        raise RuntimeError(f"downloading {name} needs torchvision (pip install torchvision matching your torch); "
                           f"without it put the files {_file_list(name)} in {directory}") from None
    cls, kwargs = TORCHVISION[name]
    dataset = getattr(torchvision.datasets, cls)
    try:
        for train in (True, False):
            split = {"split": "train" if train else "test"} if name == "svhn" else {"train": train}
            dataset(str(directory), download=True, **kwargs, **split)
    except Exception as err:  # no network, a moved URL, a checksum
        raise RuntimeError(f"downloading {name} with torchvision into {directory} failed ({err}); without a network "
                           f"put the files {_file_list(name)} there (torchvision's layout) and run again") from err


def missing_files(name, directory):
    """The files of image set `name` (:data:`FILES`, both splits) not in `directory`."""
    root = Path(directory)
    return [path for paths in FILES[name].values() for path in paths
            if not (root / path).is_file() and not (path.endswith("ubyte") and (root / f"{path}.gz").is_file())]


def _idx(root, path):
    path = root / path
    return read_idx(path if path.is_file() else path.with_name(path.name + ".gz"))


def _read_idx_pair(root, images, labels):
    x, y = _idx(root, images), _idx(root, labels)
    return x.reshape(len(x), -1), y


class _ArrayUnpickler(pickle.Unpickler):
    """Loads numpy arrays, lists and dicts only: a pickle naming anything else is refused."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}  # the last: bytes in protocol 2

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR batch")
        return super().find_class(module, name)


def _read_cifar(root, paths):
    xs, ys = [], []
    for path in paths:
        with open(root / path, "rb") as f:
            entry = _ArrayUnpickler(f, encoding="latin1").load()  # the batches are Python 2 pickles
        xs.append(np.asarray(entry["data"], dtype=np.uint8))  # (N, 3072): 1024 red, 1024 green, 1024 blue
        ys.append(np.asarray(entry["labels"] if "labels" in entry else entry["fine_labels"]))  # CIFAR-100: the 100
    return np.concatenate(xs), np.concatenate(ys)


def _read_svhn(root, path):
    from scipy.io import loadmat

    mat = loadmat(root / path)
    x = np.transpose(mat["X"], (3, 2, 0, 1))  # (32, 32, 3, N) -> (N, 3, 32, 32), as torchvision's SVHN
    y = mat["y"].reshape(-1).astype(np.int64)
    return x.reshape(len(x), -1), np.where(y == 10, 0, y)  # SVHN labels the digit 0 as 10


def _read(name, root, split):
    paths = FILES[name][split]
    if name == "svhn":
        return _read_svhn(root, paths[0])
    if name.startswith("cifar"):
        return _read_cifar(root, paths)
    x, y = _read_idx_pair(root, *paths)
    if name == "emnist_letters":
        y = y.astype(np.int64) - 1  # the files label a..z as 1..26 (torchvision keeps class 0 as "N/A")
    return x, y


def load_image_set(name, directory):
    """Image set `name` from the files in `directory` (:data:`FILES`, torchvision's layout).

    Returns
    -------
    x_train (N, 784 or 3072) uint8, y_train (N,) uint8, x_test (M, same), y_test (M,) uint8
        Labels are class ids 0..:data:`N_CLASSES` - 1.
    """
    _check_name(name)
    root = Path(directory)
    if missing := missing_files(name, root):
        raise FileNotFoundError(f"{name}: {', '.join(missing)} not found in {root}; let the workflow download it "
                                f"with torchvision, or put the files {_file_list(name)} there (torchvision's layout)")
    out = []
    for split in ("train", "test"):
        x, y = _read(name, root, split)
        if len(x) != len(y) or x.shape[1] not in (784, 3072):
            raise ValueError(f"{name} ({split}) in {root}: {len(x)} images of {x.shape[1]} values and {len(y)} "
                             "labels; expected as many labels as images of 784 or 3072 values")
        if len(y) and not 0 <= y.min() <= y.max() < N_CLASSES[name]:
            raise ValueError(f"{name} ({split}) in {root}: labels {y.min()}..{y.max()} outside 0..{N_CLASSES[name] - 1}")
        out += [x.astype(np.uint8, copy=False), y.astype(np.uint8)]
    return tuple(out)
