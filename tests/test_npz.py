"""A damaged .npz input names itself and how to remake it (crosslayer.npz), and every .npz a job reads
goes through that helper."""

import re
from pathlib import Path

import numpy as np
import pytest

from crosslayer.errors import CorruptFileError
from crosslayer.npz import load_npz, open_npz

ROOT = Path(__file__).resolve().parents[1]


# -- a damaged .npz input ---------------------------------------------------------------------------------


def damaged(path, how):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # a flipped byte in the middle of the first array's data
        flipped = bytearray(data)
        flipped[200] ^= 0xFF
        path.write_bytes(bytes(flipped))
    return path


def assert_names_the_file_and_the_fix(error, path):
    message = str(error)
    assert message.startswith(f"{path} is truncated or corrupt (")
    assert f"run snakemake --force {path} (with this run's other options" in message
    assert "Deleting it is not enough" in message


@pytest.mark.parametrize("how", ["truncated", "empty", "flipped"])
def test_a_damaged_npz_names_the_file_and_how_to_remake_it(tmp_path, how):
    path = tmp_path / "step8.jacobians.npz"
    np.savez(path, mean=np.arange(400.0).reshape(4, 10, 10), step=8)
    assert load_npz(path, ["step"])["step"] == 8
    with open_npz(path) as arrays:
        assert arrays.files == ["mean", "step"] and "mean" in arrays and dict(arrays).keys() == {"mean", "step"}
        with pytest.raises(KeyError, match=re.escape(f"{path} holds no array 'nope'")):
            arrays["nope"]
    damaged(path, how)
    with pytest.raises(CorruptFileError) as caught:
        with open_npz(path) as arrays:
            arrays["mean"]
    assert_names_the_file_and_the_fix(caught.value, path)


def test_the_library_reads_npz_inputs_through_the_helper(tmp_path):
    # the tables that read other jobs' npz files: a damaged one is named, not a bare BadZipFile
    from crosslayer.alignment.tables import load_alignment
    from crosslayer.coupling.tables import load_checkpoint

    for function, args in ((load_alignment, ([8],)), (load_checkpoint, ())):
        path = tmp_path / f"{function.__name__}.npz"
        np.savez(path, step=8, d_model=4, k=1, overlap_left=np.eye(2))
        damaged(path, "truncated")
        with pytest.raises(CorruptFileError) as caught:
            function([path] if args else path, *args)
        assert_names_the_file_and_the_fix(caught.value, path)


def test_no_script_or_library_module_loads_an_npz_itself():
    # every .npz a job reads goes through crosslayer.npz (np.load stays only for the corpus' .npy)
    sources = [*(ROOT / "workflow" / "crosslayer").rglob("*.py"), *(ROOT / "workflow" / "scripts").glob("*.py")]
    direct = {p.relative_to(ROOT).as_posix() for p in sources if p.name != "npz.py" and "np.load(" in p.read_text()}
    assert direct == {"workflow/crosslayer/models/train.py", "workflow/crosslayer/data/corpus.py"}, direct
