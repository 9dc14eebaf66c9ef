"""Files of a checkpoint directory, standard library only (the Snakefile lists them as inputs)."""

import os
from pathlib import Path

__all__ = ["checkpoint_files"]


def checkpoint_files(directory):
    """Every regular file under a directory, links followed (hub cache files link to blobs/).

    Returns
    -------
    list of (str, Path)
        ``(POSIX path relative to directory, path)``, sorted by the relative path.
    """
    directory = Path(directory)
    found = []
    for root, _, names in os.walk(directory, followlinks=True):
        for name in names:
            path = Path(root, name)
            if path.is_file():
                found.append((path.relative_to(directory).as_posix(), path))
    return sorted(found)
