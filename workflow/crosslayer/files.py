"""Files of a checkpoint directory and whether they are still those a manifest registered; standard
library only (the Snakefile lists the files as inputs and checks them before planning)."""

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path

from crosslayer.errors import CheckpointError, shorten

__all__ = ["changed_checkpoint", "checkpoint_files", "check_tokenizer_files", "first_changed_file", "is_racy",
           "json_limit", "read_checkpoint_json", "read_manifest", "sha256", "stat", "stat_cache_path",
           "TOKENIZER_JSON_FILES", "write_json_atomically"]

log = logging.getLogger(__name__)

#: Where the stat caches live, relative to the working directory: outside results/, whose files are
#: the same bytes in every run of one config (a stat cache holds mtimes).
STAT_CACHE_DIR = Path(".crosslayer") / "stat"


#: The marker Snakemake writes into a directory() output (an untrained twin's, or a user's own
#: workflow's checkpoint): not part of the checkpoint, and rewritten by every run that makes it.
SNAKEMAKE_MARKER = ".snakemake_timestamp"


def checkpoint_files(directory):
    """Every regular file under a directory, links followed (hub cache files link to blobs/), but
    Snakemake's marker (:data:`SNAKEMAKE_MARKER`).

    Raises
    ------
    CheckpointError
        A folder link that points into the directory or above it, or at a folder already listed
        (naming the link): it would list the same files again, without end for ``a -> .``.

    Returns
    -------
    list of (str, Path)
        ``(POSIX path relative to directory, path)``, sorted by the relative path.
    """
    directory = Path(directory)
    top, found = directory.resolve(), []
    seen = {_identity(directory)}
    for root, folders, names in os.walk(directory, followlinks=True):
        for folder in folders:  # a link back into the folder (a -> .) would be walked without end
            path, identity = Path(root, folder), _identity(Path(root, folder))
            if identity in seen or top.is_relative_to(path.resolve()):
                target = os.readlink(path) if path.is_symlink() else path.resolve()
                raise CheckpointError(
                    f"{path} links to {target}, a folder the checkpoint {directory} already holds or one above it: "
                    "following it would list its files again and again (a hub cache links files, not folders). "
                    "Remove the link, or copy what it points to")
            seen.add(identity)
        for name in names:
            path = Path(root, name)
            if path.is_file() and name != SNAKEMAKE_MARKER:
                found.append((path.relative_to(directory).as_posix(), path))
    return sorted(found)


def _identity(path):
    """(device, inode) of a folder, links followed: the same folder under two names."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


#: A file changed less than this long before it was looked at is hashed again next time: a change
#: within one tick of a coarse file-system clock would leave its ctime as it was (git's "racy" case).
RACY_NS = 2 * 10**9


def stat(path):
    """``[size, mtime_ns, ctime_ns, inode]`` of a file, links followed (hub cache files link to blobs/).

    The kernel sets ctime at every write, rename or metadata change, and no user call sets it back:
    ``touch -r``, ``cp -p``, ``rsync -t`` and archives restore mtimes, not ctimes; a file put in
    another's place (``mv``, unpacked anew) has another inode as well.
    """
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def is_racy(st):
    """True while a file whose :func:`stat` is `st` changed too recently (:data:`RACY_NS`) for its
    ctime to tell a later change in the same tick of a coarse file-system clock apart: a stat cache
    records no such file, which is hashed again next time."""
    return time.time_ns() - st[2] < RACY_NS


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def stat_cache_path(manifest_path):
    """Where the size, mtime and sha256 of a manifest's checkpoint files, as last verified, are kept.

    For a manifest under the working directory (every manifest of a workflow run):
    ``.crosslayer/stat/<its path>``, outside results/; for one elsewhere, a hidden file beside it
    (``.step16.json.stat``). A cache only: deleting it costs one more hash of each file.
    """
    manifest_path = Path(manifest_path)
    absolute = manifest_path.absolute()
    cwd = Path.cwd()
    if absolute.is_relative_to(cwd):
        return cwd / STAT_CACHE_DIR / absolute.relative_to(cwd)
    return manifest_path.with_name(f".{manifest_path.name}.stat")


def _read_stat_cache(path):
    """``{name: [*stat, sha256]}`` from a stat cache; empty when absent or unreadable."""
    if path is None:
        return {}
    try:
        cache = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


#: The most bytes of a JSON file a checkpoint brings that are read whole: config.json, a shard index or
#: tokenizer_config.json is kilobytes (a chat template included), a tokenizer.json tens of megabytes
#: (Gemma 3's: 33 MB). A larger file is no such file, and would take gigabytes to parse.
JSON_LIMITS = {"tokenizer.json": 64 * 2**20, "vocab.json": 64 * 2**20}
JSON_LIMIT = 8 * 2**20

#: The JSON files of a tokenizer that transformers reads, checked when a checkpoint is registered.
TOKENIZER_JSON_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                        "added_tokens.json")

def json_limit(name):
    """The most bytes of the checkpoint JSON file called `name` that are read (:data:`JSON_LIMITS`)."""
    return JSON_LIMITS.get(name, JSON_LIMIT)


def read_checkpoint_json(path, *, model=None, revision=None):
    """A JSON file of a checkpoint (config.json, a shard index, a tokenizer's), refused by name when it
    is larger than :func:`json_limit` or does not parse.

    Raises
    ------
    CheckpointError
        Naming the model, revision and file; the parser's message cut to a few hundred characters.
    """
    path = Path(path)
    context = {"model": model, "revision": revision, "file": path.name}
    try:
        size = path.stat().st_size
        if size > json_limit(path.name):
            raise CheckpointError(f"{size:,} bytes, more than a {path.name} has ({json_limit(path.name):,} at most): "
                                  f"the file in {path.parent} is no {path.name}; re-save or re-download the "
                                  "checkpoint", **context)
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: nested deeper than Python parses
        raise CheckpointError(f"{path} is not valid JSON ({shorten(error)}): re-save or re-download the checkpoint",
                              **context) from None


def check_tokenizer_files(directory, *, model=None, revision=None):
    """Each tokenizer JSON file in `directory` (:data:`TOKENIZER_JSON_FILES`) parses, within its size
    bound: a malformed one is named when the checkpoint is registered, not jobs later."""
    for name in TOKENIZER_JSON_FILES:
        if (Path(directory) / name).is_file():
            read_checkpoint_json(Path(directory) / name, model=model, revision=revision)


def write_json_atomically(out_path, data):
    """A temp file in the same directory, then os.replace: readers (and Snakemake) see either
    the old file or the complete new one, never half a file."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_path.parent, prefix=f".{out_path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out_path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_manifest(path):
    """Read a manifest written by :func:`crosslayer.models.checkpoints.write_manifest`.

    Raises
    ------
    CheckpointError
        If the file is missing or not valid JSON.
    """
    try:
        manifest = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot read manifest: {error}", file=str(path)) from error
    manifest["path"] = os.path.normpath(Path(path).parent.absolute() / manifest["path"])  # a relative one, resolved
    return manifest


def changed_checkpoint(manifest_path):
    """How a registered checkpoint's files differ from those its manifest recorded, or None.

    Whatever the files' mtimes: a file is hashed again when its size, mtime, ctime or inode differs
    from the stat cache (:func:`stat_cache_path`), so a replacement dated in the past (``cp -p``,
    ``touch -r``, a restore from backup, ``rsync -t``, an archive with normalised mtimes) is caught as
    surely as a newer one; unchanged files cost one ``stat``.

    Parameters
    ----------
    manifest_path : str or Path
        A manifest (``crosslayer.models.checkpoints.write_manifest``).

    Returns
    -------
    str or None
        What changed, naming the first such file (missing, added, or another sha256); None when
        the checkpoint holds exactly the registered files, or when the manifest cannot be read
        (the jobs that read it say why).
    """
    try:
        manifest = read_manifest(manifest_path)
        root, recorded = Path(manifest["path"]), manifest["files"]
    except (CheckpointError, KeyError, TypeError):
        return None
    present = dict(checkpoint_files(root))
    if missing := sorted(set(recorded) - set(present)):
        return f"{root / missing[0]} is gone"
    if added := sorted(set(present) - set(recorded)):
        return f"{root / added[0]} was added"
    changed = first_changed_file(root, recorded, stat_cache_path(manifest_path))
    if changed is None:
        return None
    name, found = changed
    return f"{root / name} has another sha256 ({found[:12]}..., registered {recorded[name][:12]}...)"


def first_changed_file(root, recorded, stat_cache):
    """The first recorded file of a checkpoint that is gone or holds other bytes, or None.

    A file whose :func:`stat` (size, mtime, ctime, inode) the stat cache holds beside the recorded
    sha256 is not read; any other is hashed in full. When every file matches, the stat cache is
    brought up to date (files changed in the last :data:`RACY_NS` left out).

    Parameters
    ----------
    root : str or Path
        The checkpoint directory.
    recorded : dict[str, str]
        Relative path -> sha256, as a manifest's ``files``.
    stat_cache : str, Path or None
        JSON file of ``{name: [size, mtime_ns, ctime_ns, inode, sha256]}`` (:func:`stat_cache_path`);
        None hashes every file and keeps no cache.

    Returns
    -------
    (str, str or None) or None
        ``(name, its sha256 now)``, the sha256 None for a file that is gone.
    """
    cache = _read_stat_cache(stat_cache)
    seen = {}
    for name, expected in recorded.items():
        path = Path(root) / name
        if not path.is_file():
            return name, None
        now = stat(path)  # before the hash: a change while hashing shows at the next look
        if cache.get(name) != [*now, expected]:
            found = sha256(path)
            if found != expected:
                return name, found
            if is_racy(now):
                continue  # changed too recently to be told apart from a later change: hashed next time
        seen[name] = [*now, expected]
    if stat_cache is not None and seen != cache:
        try:
            write_json_atomically(stat_cache, seen)
        except OSError as err:  # a read-only tree: the check stays correct, only slower
            log.warning("cannot update the stat cache %s: %s", stat_cache, err)
    return None
