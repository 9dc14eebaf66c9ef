"""Reading the workflow's own ``.npz`` files, all through :func:`open_npz` (or :func:`load_npz`): a
truncated or corrupt file (a full disk, a copy cut short) is named, with what to do, instead of a bare
``BadZipFile`` that every re-run repeats (Snakemake sees the file there and up to date, so it never
remakes it by itself)."""

from collections.abc import Mapping

import numpy as np

from crosslayer.errors import CorruptFileError

__all__ = ["NpzArrays", "load_npz", "open_npz"]

# Not the file's bytes: a missing key, a missing or unreadable file, no memory.
_PASS = (KeyError, FileNotFoundError, PermissionError, IsADirectoryError, MemoryError)


def open_npz(path):
    """An ``.npz`` file opened as ``np.load`` opens it, used the same way (``with open_npz(path) as
    arrays:``); see :class:`NpzArrays`."""
    return NpzArrays(path)


class NpzArrays(Mapping):
    """An open ``.npz`` file: arrays read when indexed, ``files``, a context manager, as ``np.load``'s;
    damaged bytes, at opening or at reading an array, raise :class:`CorruptFileError` naming the file;
    a key it lacks raises KeyError naming the file."""

    def __init__(self, path):
        self.path = path
        self._data = _read(path, np.load, path, allow_pickle=False)
        self.files = list(self._data.files)

    def __getitem__(self, key):
        if key not in self.files:
            raise KeyError(f"{self.path} holds no array {key!r} (it has {self.files})")
        return _read(self.path, self._data.__getitem__, key)

    def __iter__(self):
        return iter(self.files)

    def __len__(self):
        return len(self.files)

    def close(self):
        self._data.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _read(path, function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except _PASS:
        raise
    except Exception as err:  # damaged bytes surface as any of a dozen types: BadZipFile, zlib.error,
        # EOFError, ValueError of an array header, NotImplementedError of a compression method, ...
        raise CorruptFileError(path, f"{type(err).__name__}: {err}") from err


def load_npz(path, keys=None):
    """The arrays of an ``.npz`` file as a dict, read now (every one, or those `keys` names), the file
    closed; errors as :class:`NpzArrays`'s."""
    with open_npz(path) as arrays:
        return {key: arrays[key] for key in (arrays.files if keys is None else keys)}
