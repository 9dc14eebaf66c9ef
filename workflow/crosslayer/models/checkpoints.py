"""Checkpoints: which ones a model has, fetching them from the hub, and their manifests.

A checkpoint comes from one of three sources:

``hub``
    A snapshot of ``repo@revision`` in the huggingface_hub cache (:func:`download_checkpoint`).
``local``
    An existing directory holding a saved checkpoint.
``train``
    A directory the workflow's own training step wrote with ``save_pretrained``.

Whatever the source, a checkpoint is described by a JSON manifest (:func:`write_manifest`)
that records where it is and the sha256 of every file, so downstream steps read the manifest
rather than guessing paths, and can check that the files have not changed since
(:func:`verify_manifest`).
"""

import logging
import os
import time
from pathlib import Path

import httpx2
from huggingface_hub import snapshot_download
from huggingface_hub.errors import (
    DisabledRepoError,
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from crosslayer.errors import CheckpointError
from crosslayer.files import (
    checkpoint_files,
    first_changed_file,
    is_racy,
    read_manifest,
    sha256,
    stat,
    stat_cache_path,
    write_json_atomically,
)

__all__ = [
    "BIN_PATTERNS",
    "SOURCES",
    "TOKENIZER_PATTERNS",
    "WEIGHT_PATTERNS",
    "download_checkpoint",
    "file_digests",
    "identical_steps",
    "read_manifest",
    "stat_cache_path",
    "verified_manifest",
    "verify_manifest",
    "weights_digest",
    "write_manifest",
]

log = logging.getLogger(__name__)

#: Files fetched from the hub: the config and the safetensors weights (single file or shards).
WEIGHT_PATTERNS = ["config.json", "model*.safetensors", "model.safetensors.index.json"]
#: Fallback for checkpoints published only as PyTorch pickles.
BIN_PATTERNS = ["config.json", "pytorch_model*.bin", "pytorch_model.bin.index.json"]
#: Fetched beside the weights when the repo has them: the activation stages tokenize texts.
TOKENIZER_PATTERNS = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                      "vocab.json", "merges.txt", "vocab.txt", "spiece.model"]
SOURCES = ("hub", "local", "train", "init")  # init: an untrained twin (crosslayer.models.untrained)

# The same transport errors huggingface_hub's own http_backoff retries (its client is httpx2).
_TRANSIENT_NETWORK = (
    httpx2.TimeoutException,
    httpx2.NetworkError,
    httpx2.RemoteProtocolError,
    ConnectionError,
    TimeoutError,
)
_TRANSIENT_STATUS = (408, 429)


def download_checkpoint(repo, revision, *, cache_dir, model=None, attempts=5, backoff_s=2.0, token=None, weights=True):
    """Fetch the config and weights of ``repo@revision`` into the huggingface_hub cache.

    Safetensors weights are preferred; a snapshot without them is fetched again with
    :data:`BIN_PATTERNS`. Tokenizer files (:data:`TOKENIZER_PATTERNS`) come along where the repo
    has them. Interrupted downloads resume (huggingface_hub keeps partial files
    in its cache), and with ``HF_HUB_OFFLINE=1`` a cached snapshot is resolved without network.

    Parameters
    ----------
    repo : str
        Hub repo id, e.g. ``"EleutherAI/pythia-410m"``.
    revision : str
        Branch, tag or commit hash, e.g. ``"step128"``.
    cache_dir : str or Path
        huggingface_hub cache directory.
    model : str, optional
        The model's name in the workflow config, for error messages.
    attempts : int
        Tries in all for transient failures (network errors, timeouts, 408/429/5xx).
    backoff_s : float
        Wait ``backoff_s * 2**i`` seconds after the ``i``-th failed try.
    token : str, optional
        Hub token; by default huggingface_hub uses ``HF_TOKEN`` or the stored login.
    weights : bool
        False fetches only the config and tokenizer (an untrained twin is built from them).

    Returns
    -------
    Path
        The snapshot directory ``<cache>/models--org--name/snapshots/<commit>``; its name is
        the resolved commit hash.

    Raises
    ------
    CheckpointError
        At once when the repo, revision or file does not exist, access is denied, or the
        revision is not cached while offline; after ``attempts`` tries for transient errors.
    """
    def fetch(patterns):
        path = snapshot_download(
            repo_id=repo, revision=revision, cache_dir=cache_dir, allow_patterns=patterns, token=token
        )
        return Path(path)

    try:
        snapshot = _with_retries(lambda: fetch((WEIGHT_PATTERNS if weights else ["config.json"]) + TOKENIZER_PATTERNS),
                                 attempts=attempts, backoff_s=backoff_s)
        if weights and not any(snapshot.glob("model*.safetensors")):
            log.info("%s@%s has no safetensors weights: fetching pytorch_model*.bin", repo, revision)
            snapshot = _with_retries(lambda: fetch(BIN_PATTERNS + TOKENIZER_PATTERNS), attempts=attempts,
                                     backoff_s=backoff_s)
    except Exception as error:
        advice = _advice(error, cache_dir=cache_dir, attempts=attempts)
        if advice is None:
            raise  # not a hub error: a bug, let it show as such
        raise CheckpointError(
            f"{type(error).__name__}: {error}\n{advice}", model=model, revision=revision, file=repo
        ) from error

    if not (snapshot / "config.json").is_file():
        raise CheckpointError(f"no config.json in {snapshot}", model=model, revision=revision, file=repo)
    if weights and not any(snapshot.glob("model*.safetensors")) and not any(snapshot.glob("pytorch_model*.bin")):
        raise CheckpointError(
            f"no weights (model*.safetensors or pytorch_model*.bin) in {snapshot}",
            model=model, revision=revision, file=repo,
        )
    return snapshot


def _with_retries(fn, *, attempts, backoff_s, retry_on=None):
    """Call ``fn()``, retrying with exponential backoff while its error is transient.

    Parameters
    ----------
    fn : callable
        Called with no arguments; its return value is returned.
    attempts : int
        Calls in all (at least 1).
    backoff_s : float
        Sleep ``backoff_s * 2**i`` seconds after the ``i``-th failure (``i`` from 0).
    retry_on : callable, optional
        ``retry_on(error) -> bool``: whether an exception is worth another try.
        Defaults to :func:`_is_transient`.

    Raises
    ------
    Exception
        The first non-transient error, or the last error once the attempts are used up.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    retry_on = retry_on or _is_transient
    for i in range(attempts):
        try:
            return fn()
        except Exception as error:
            if i == attempts - 1 or not retry_on(error):
                raise
            delay = backoff_s * 2**i
            log.warning("attempt %d/%d failed (%s: %s); retrying in %.3g s", i + 1, attempts,
                        type(error).__name__, error, delay)
            time.sleep(delay)


def _is_transient(error):
    """Whether a hub error may go away by itself (network trouble, rate limit, server error)."""
    if isinstance(error, LocalEntryNotFoundError):
        # snapshot_download raises this both when offline (final) and when the hub could
        # not be reached (worth retrying); the chained cause tells which.
        cause = error.__cause__
        return cause is not None and _is_transient(cause)
    if isinstance(error, (OfflineModeIsEnabled, RepositoryNotFoundError, RevisionNotFoundError,
                          EntryNotFoundError, DisabledRepoError)):
        return False
    if isinstance(error, HfHubHTTPError):
        status = getattr(error.response, "status_code", None)
        return status is None or status in _TRANSIENT_STATUS or status >= 500
    return isinstance(error, _TRANSIENT_NETWORK)


def _advice(error, *, cache_dir, attempts):
    """What to do about a failed download, or None when ``error`` is not a hub error."""
    if _is_transient(error):
        return f"The hub could not be reached in {attempts} attempts: check the network and rerun (downloads resume)."
    if isinstance(error, GatedRepoError):
        return "The repo is gated: accept its terms on the hub and set HF_TOKEN to a token with access."
    if isinstance(error, RepositoryNotFoundError):
        return "Check the repo id; if the repo is private, set HF_TOKEN to a token with access."
    if isinstance(error, RevisionNotFoundError):
        return "Check the revision: it must be a branch, tag or commit of the repo."
    if isinstance(error, LocalEntryNotFoundError):
        return (
            f"The revision is not (completely) in the cache {cache_dir} and the hub cannot be reached: "
            "run the download where the hub is reachable (without HF_HUB_OFFLINE=1), then reuse that cache."
        )
    if isinstance(error, (EntryNotFoundError, HFValidationError, DisabledRepoError)):
        return "Check the repo id and revision."
    if isinstance(error, HfHubHTTPError) and getattr(error.response, "status_code", None) in (401, 403):
        return "Access denied: set HF_TOKEN to a token with access to the repo."
    if isinstance(error, (HfHubHTTPError, OfflineModeIsEnabled)):
        return "The hub refused the request: check the repo id and revision, and HF_TOKEN."
    return None


def file_digests(directory):
    """Sha256 of every regular file under a directory.

    Parameters
    ----------
    directory : str or Path
        Checkpoint directory. Symlinks are followed (files in the huggingface_hub cache
        are links to its ``blobs/``), so digests are of the content.

    Returns
    -------
    dict[str, str]
        POSIX path relative to ``directory`` -> sha256 hex digest, sorted by path.
    """
    return {name: sha256(path) for name, path in checkpoint_files(directory)}


def write_manifest(out_path, *, model, step, source, checkpoint_dir, repo=None, revision=None, commit=None,
                   stat_cache=True):
    """Describe a checkpoint in a JSON manifest, written atomically.

    Parameters
    ----------
    out_path : str or Path
        Manifest file to write; its directory is created if needed.
    model : str
        The model's name in the workflow config.
    step : int
        Training step of the checkpoint.
    source : {"hub", "local", "train", "init"}
        Where the checkpoint came from (``init``: an untrained twin built here).
    checkpoint_dir : str or Path
        Directory holding ``config.json`` and the weights.
    repo, revision : str, optional
        Hub repo id and revision (for ``hub``; free for the others).
    commit : str, optional
        Commit hash of a hub checkpoint; defaults to the name of the snapshot directory,
        which is the commit huggingface_hub resolved ``revision`` to.
    stat_cache : bool, default=True
        Also record each file's :func:`crosslayer.files.stat` in :func:`stat_cache_path` (not in
        the manifest, whose bytes depend only on the content), so that :func:`verified_manifest`
        hashes a file again only when its size, mtime, ctime or inode changed.

    Returns
    -------
    dict
        The manifest: ``model``, ``step``, ``source``, ``path`` (absolute; recorded in the
        file relative to it when inside the working directory), ``repo``,
        ``revision``, ``commit`` and ``files`` (see :func:`file_digests`).

    Raises
    ------
    CheckpointError
        If ``checkpoint_dir`` has no ``config.json``. No manifest is written then, and a
        failure while writing leaves any previous manifest untouched.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
    checkpoint_dir = Path(checkpoint_dir).resolve()
    if not (checkpoint_dir / "config.json").is_file():
        raise CheckpointError(
            f"no config.json in {checkpoint_dir}: not a saved checkpoint", model=model, revision=revision,
            file=str(checkpoint_dir / "config.json"),
        )
    if source == "hub" and commit is None:
        commit = checkpoint_dir.name
    out_path = Path(out_path)
    manifest = {
        "model": model,
        "step": int(step),
        "source": source,
        "path": _recorded_path(checkpoint_dir, out_path),
        "repo": repo,
        "revision": revision,
        "commit": commit,
        "files": {},
    }
    stats = {}
    for name, path in checkpoint_files(checkpoint_dir):
        before = stat(path)  # before the hash: a change while hashing shows at the next look
        manifest["files"][name] = sha256(path)
        if not is_racy(before):
            stats[name] = [*before, manifest["files"][name]]
    write_json_atomically(out_path, manifest)
    if stat_cache:
        write_json_atomically(stat_cache_path(out_path), stats)
    return {**manifest, "path": str(checkpoint_dir)}


def _recorded_path(checkpoint_dir, manifest_path):
    # A checkpoint inside the working directory (a trained one) is recorded relative to the
    # manifest: the same bytes in every working directory, and a results tree that can be moved.
    if not checkpoint_dir.is_relative_to(Path.cwd().resolve()):
        return str(checkpoint_dir)
    return os.path.relpath(checkpoint_dir, manifest_path.parent.resolve())


def verified_manifest(path):
    """Read a manifest and check that its checkpoint still holds the files it recorded.

    Every job that reads a checkpoint starts here. Cheap: a file whose size, mtime, ctime and inode
    are those seen at the last verification (or registration) is not read again; any other is
    hashed in full, and the stat cache is updated when its content is unchanged.

    Returns
    -------
    dict
        The manifest (:func:`read_manifest`).

    Raises
    ------
    CheckpointError
        See :func:`verify_manifest`.
    """
    manifest = read_manifest(path)
    verify_manifest(manifest, stat_cache=stat_cache_path(path), manifest_path=path)
    return manifest


def verify_manifest(manifest, *, stat_cache=None, manifest_path=None):
    """Check that a checkpoint's files still have the digests its manifest recorded.

    Files added to the directory since are not checked.

    Parameters
    ----------
    manifest : dict
    stat_cache : str or Path, optional
        JSON file of ``{name: [*stat, sha256]}`` (see :func:`stat_cache_path`): files whose
        :func:`crosslayer.files.stat` matches it, with the manifest's sha256, are not hashed again.
        Without it every file is hashed.
    manifest_path : str or Path, optional
        Named in the advice of the error.

    Raises
    ------
    CheckpointError
        Naming the model, revision and the first file that is missing or whose sha256
        changed.
    """
    # The workflow compares the files with the manifest before it plans (files.changed_checkpoint): a job
    # sees a change only when it came while the run was under way
    redo = ("run the workflow again: it registers the checkpoint anew and redoes its analyses" if manifest_path
            else "re-register the checkpoint")
    changed = first_changed_file(manifest["path"], manifest["files"], stat_cache)
    if changed is None:
        return
    name, found = changed
    context = {"model": manifest.get("model"), "revision": manifest.get("revision"),
               "file": str(Path(manifest["path"]) / name)}
    if found is None:
        raise CheckpointError(f"missing: the checkpoint changed after it was registered; {redo}", **context)
    raise CheckpointError(
        f"sha256 is {found}, the manifest recorded {manifest['files'][name]}: the file changed after the checkpoint "
        f"was registered. Restore it, or {redo}",
        **context,
    )


#: Weight files of a checkpoint, whatever their shard names.
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


def weights_digest(manifest):
    """The sorted sha256s of a manifest's weight files (``*.safetensors``, ``*.bin``): equal for two
    checkpoints that hold the same weights, whatever their configs or shard names."""
    return tuple(sorted(sha for name, sha in manifest["files"].items() if name.endswith(_WEIGHT_SUFFIXES)))


def identical_steps(manifests):
    """Steps of one model whose weights are byte-identical to an earlier step's.

    Public checkpoint series have served the same weights under different step revisions
    (EleutherAI/pythia issue 205): measured "over training", such steps are one point twice.

    Parameters
    ----------
    manifests : iterable of dict
        One model's manifests (:func:`write_manifest`), any order.

    Returns
    -------
    list of dict
        Per repeated step, in step order: ``step``, ``revision``, ``same_as_step``,
        ``same_as_revision`` (the first step with those weights), ``sha256`` (its first weight file).
    """
    first, repeats = {}, []
    for manifest in sorted(manifests, key=lambda m: m["step"]):
        digest = weights_digest(manifest)
        if not digest:
            continue
        if digest in first:
            earlier = first[digest]
            repeats.append({"step": manifest["step"], "revision": manifest.get("revision"),
                            "same_as_step": earlier["step"], "same_as_revision": earlier.get("revision"),
                            "sha256": digest[0]})
        else:
            first[digest] = manifest
    return repeats
