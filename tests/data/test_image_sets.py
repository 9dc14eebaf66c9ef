"""The image sets of paper 003's Fig. 13 (crosslayer.data.image_sets): small files written in each
set's own format and torchvision's folder layout, read back by our loader and, where torchvision
imports, by torchvision's own classes with download disabled."""

import pickle
import sys

import numpy as np
import pytest
from image_files import N, write_cifar, write_idx_set, write_svhn

from crosslayer.data.image_sets import FILES, IMAGE_SETS, download_image_set, load_image_set

@pytest.mark.parametrize("gz", [False, True])
def test_emnist_letters_are_read_with_labels_from_zero(tmp_path, gz):
    written = write_idx_set(tmp_path, "emnist_letters", (1, 27), gz)  # the files' labels: 1..26
    x_train, y_train, x_test, y_test = load_image_set("emnist_letters", tmp_path)
    for (x, y), (xs, ys) in zip((written["train"], written["test"]), ((x_train, y_train), (x_test, y_test))):
        np.testing.assert_array_equal(xs, x.reshape(len(x), 784))
        np.testing.assert_array_equal(ys, y - 1)
    assert x_train.dtype == y_train.dtype == np.uint8


@pytest.mark.parametrize("gz", [False, True])
def test_fashion_mnist_is_read_from_its_raw_folder(tmp_path, gz):
    written = write_idx_set(tmp_path, "fashion_mnist", (0, 10), gz)
    x_train, y_train, x_test, y_test = load_image_set("fashion_mnist", tmp_path)
    np.testing.assert_array_equal(x_train, written["train"][0].reshape(-1, 784))
    np.testing.assert_array_equal(y_test, written["test"][1])


def test_svhn_is_flattened_channel_first_and_its_ten_is_zero(tmp_path):
    written = write_svhn(tmp_path)
    x_train, y_train, x_test, y_test = load_image_set("svhn", tmp_path)
    for (X, y), xs, ys in ((written["train"], x_train, y_train), (written["test"], x_test, y_test)):
        assert xs.shape == (len(y), 3072)
        np.testing.assert_array_equal(xs, X.transpose(3, 2, 0, 1).reshape(len(y), 3072))
        np.testing.assert_array_equal(ys, np.where(y[:, 0] == 10, 0, y[:, 0]))
    assert y_train[0] == 0


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_batches_are_stacked_in_order(tmp_path, name):
    written = write_cifar(tmp_path, name)
    x_train, y_train, x_test, y_test = load_image_set(name, tmp_path)
    np.testing.assert_array_equal(x_train, written["train"][0])
    np.testing.assert_array_equal(y_train, written["train"][1])
    np.testing.assert_array_equal(x_test, written["test"][0])
    np.testing.assert_array_equal(y_test, written["test"][1])
    assert len(x_train) == N["train"] * len(FILES[name]["train"])


def test_a_pickle_naming_other_code_is_refused(tmp_path):
    write_cifar(tmp_path, "cifar100")
    (tmp_path / "cifar-100-python" / "test").write_bytes(pickle.dumps({"data": print}, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="print is not allowed in a CIFAR batch"):
        load_image_set("cifar100", tmp_path)


def test_labels_out_of_range_are_refused(tmp_path):
    write_idx_set(tmp_path, "fashion_mnist", (5, 12), False)
    with pytest.raises(ValueError, match=r"fashion_mnist \(train\) in .*: labels 5\.\.1[01] outside 0\.\.9"):
        load_image_set("fashion_mnist", tmp_path)


@pytest.mark.parametrize("name", IMAGE_SETS)
def test_missing_files_name_the_directory_and_the_files(tmp_path, name):
    with pytest.raises(FileNotFoundError, match=rf"{name}: .* not found in {tmp_path}; .* put the files "
                                                rf"{FILES[name]['train'][0]}"):
        load_image_set(name, tmp_path)


def test_a_download_without_torchvision_says_which_files_to_put_where(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # as if not installed
    with pytest.raises(RuntimeError, match=rf"needs torchvision .* put the files train_32x32\.mat, test_32x32\.mat "
                                           rf"in {tmp_path}"):
        download_image_set("svhn", tmp_path)
    write_svhn(tmp_path)
    download_image_set("svhn", tmp_path)  # the files are there: nothing to download, no torchvision needed
    with pytest.raises(ValueError, match="unknown image set 'mnist'"):
        load_image_set("mnist", tmp_path)


# --------------------------------------------------------------------------- torchvision reads the same files


def _as_torchvision_reads(root, name):
    """The set as torchvision's class reads it with download disabled: (x, y) per split. CIFAR's and
    SVHN's classes check each file's md5 against the real data: subclasses set the checksums to
    None, which torchvision's check_integrity takes as "the file exists"."""
    datasets = pytest.importorskip("torchvision.datasets")
    if name == "svhn":
        cls = type("SVHN", (datasets.SVHN,), {"split_list": {k: [url, file, None] for k, (url, file, _) in
                                                             datasets.SVHN.split_list.items()}})
        return {split: (d.data.reshape(len(d.data), -1), np.asarray(d.labels))
                for split in ("train", "test") for d in [cls(str(root), split=split)]}
    if name.startswith("cifar"):
        base = getattr(datasets, name.upper())
        cls = type(base.__name__, (base,), {"train_list": [[f, None] for f, _ in base.train_list],
                                            "test_list": [[f, None] for f, _ in base.test_list],
                                            "meta": {**base.meta, "md5": None}})
        return {split: (d.data.transpose(0, 3, 1, 2).reshape(len(d.data), -1), np.asarray(d.targets))
                for split in ("train", "test") for d in [cls(str(root), train=split == "train")]}
    cls, kwargs = (datasets.EMNIST, {"split": "letters"}) if name == "emnist_letters" else (datasets.FashionMNIST, {})
    return {split: (d.data.numpy().reshape(len(d.data), -1), d.targets.numpy() - (name == "emnist_letters"))
            for split in ("train", "test") for d in [cls(str(root), train=split == "train", **kwargs)]}


@pytest.mark.parametrize("name", IMAGE_SETS)
def test_torchvision_reads_the_same_arrays_from_these_files(tmp_path, name):
    if name in ("emnist_letters", "fashion_mnist"):
        write_idx_set(tmp_path, name, (1, 27) if name == "emnist_letters" else (0, 10), gz=False)
    else:
        (write_svhn if name == "svhn" else lambda root: write_cifar(root, name))(tmp_path)
    ours = load_image_set(name, tmp_path)
    theirs = _as_torchvision_reads(tmp_path, name)
    for (x, y), split in zip((ours[:2], ours[2:]), ("train", "test")):
        np.testing.assert_array_equal(x, theirs[split][0])
        np.testing.assert_array_equal(y, theirs[split][1])
