"""Lay out a Hugging Face hub cache on disk exactly as huggingface_hub writes it, so tests can
resolve checkpoints through huggingface_hub's own offline code path (HF_HUB_OFFLINE=1)."""

import hashlib
import os

REPO = "EleutherAI/pythia-tiny"
COMMIT = hashlib.sha1(b"step128").hexdigest()  # any 40-hex string is a valid commit hash


def lay_out_cache(cache, files, *, repo=REPO, commit=COMMIT, refs=("step128",)):
    """Write ``files`` (name -> source path) into a hub cache as huggingface_hub does.

    ``<cache>/models--<org>--<name>/blobs/<etag>`` holds the content (etag: sha256 for LFS
    files such as weights, git blob sha1 otherwise), ``snapshots/<commit>/<name>`` are
    relative symlinks to the blobs, and ``refs/<revision>`` holds the commit hash with no
    newline (snapshot_download reads it verbatim). Returns the snapshot directory.
    """
    storage = cache / ("models--" + repo.replace("/", "--"))
    snapshot = storage / "snapshots" / commit
    (storage / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for name, source in files.items():
        data = source.read_bytes()
        if name.endswith((".safetensors", ".bin")):
            etag = hashlib.sha256(data).hexdigest()
        else:
            etag = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        (storage / "blobs" / etag).write_bytes(data)
        (snapshot / name).symlink_to(os.path.join("..", "..", "blobs", etag))
    (storage / "refs").mkdir(exist_ok=True)
    for ref in refs:
        (storage / "refs" / ref).write_text(commit)
    return snapshot
