"""Tests for crosslayer.models.checkpoints.

The hub source is tested without network and without mocking huggingface_hub: each test lays
out a cache exactly as huggingface_hub 2.4 writes it and lets ``snapshot_download`` resolve it
in offline mode.
"""

import hashlib
import json
import logging
import os
import socket
import time
from pathlib import Path

import httpx2
import huggingface_hub.constants
import pytest
import torch
from hub_cache import COMMIT, REPO, lay_out_cache
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

from crosslayer.errors import CheckpointError
from crosslayer.models.checkpoints import (
    _is_transient,
    _with_retries,
    download_checkpoint,
    file_digests,
    read_manifest,
    stat_cache_path,
    verified_manifest,
    verify_manifest,
    write_manifest,
)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A real (tiny) GPT-NeoX checkpoint: config.json, generation_config.json, model.safetensors."""
    torch.manual_seed(0)
    config = GPTNeoXConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=101
    )
    model = GPTNeoXForCausalLM(config)
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)
    torch.save(model.state_dict(), path / "pytorch_model.bin")  # for the .bin fallback
    return path


# -- hub source, resolved offline by huggingface_hub ----------------------------------------


def test_download_resolves_branch_offline_and_manifest_verifies(tmp_path, offline, tiny_checkpoint):
    names = ["config.json", "generation_config.json", "model.safetensors"]
    snapshot = lay_out_cache(tmp_path / "cache", {n: tiny_checkpoint / n for n in names})

    path = download_checkpoint(REPO, "step128", cache_dir=tmp_path / "cache", model="pythia-tiny")
    assert path == snapshot

    manifest = write_manifest(
        tmp_path / "manifests" / "pythia-tiny" / "128.json", model="pythia-tiny", step=128, source="hub",
        checkpoint_dir=path, repo=REPO, revision="step128",
    )
    assert manifest["commit"] == COMMIT
    assert manifest["path"] == str(snapshot.resolve())
    assert manifest["files"] == {n: hashlib.sha256((tiny_checkpoint / n).read_bytes()).hexdigest() for n in names}
    assert read_manifest(tmp_path / "manifests" / "pythia-tiny" / "128.json") == manifest
    verify_manifest(manifest)

    blob = (snapshot / "model.safetensors").resolve()  # corrupt the content, as a bad disk would
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as caught:
        verify_manifest(manifest)
    message = str(caught.value)
    assert "pythia-tiny" in message and "step128" in message and "model.safetensors" in message
    assert "sha256" in message


def test_download_by_commit_hash_offline(tmp_path, offline, tiny_checkpoint):
    names = ["config.json", "model.safetensors"]
    snapshot = lay_out_cache(tmp_path, {n: tiny_checkpoint / n for n in names}, refs=())
    assert download_checkpoint(REPO, COMMIT, cache_dir=tmp_path) == snapshot


def test_download_falls_back_to_bin(tmp_path, offline, tiny_checkpoint):
    names = ["config.json", "pytorch_model.bin"]
    snapshot = lay_out_cache(tmp_path, {n: tiny_checkpoint / n for n in names})
    path = download_checkpoint(REPO, "step128", cache_dir=tmp_path)
    assert path == snapshot
    assert sorted(file_digests(path)) == names


def test_revision_not_in_cache_fails_fast_with_hub_message(tmp_path, offline, tiny_checkpoint):
    lay_out_cache(tmp_path, {"config.json": tiny_checkpoint / "config.json"})
    start = time.monotonic()
    with pytest.raises(CheckpointError) as caught:
        download_checkpoint(REPO, "step256", cache_dir=tmp_path, model="pythia-tiny", backoff_s=5)
    assert time.monotonic() - start < 2  # no retries: a missing revision does not appear by waiting
    error = caught.value
    assert (error.model, error.revision, error.file) == ("pythia-tiny", "step256", REPO)
    message = str(error)
    assert "Cannot find an appropriate cached snapshot folder" in message  # the hub's own text
    assert "HF_HUB_OFFLINE" in message


def test_incomplete_snapshot_offline_fails_fast(tmp_path, offline, tiny_checkpoint):
    # An interrupted download leaves the tree listing (trees/<commit>.json) and some files;
    # huggingface_hub then refuses the partial snapshot offline, and so must we.
    snapshot = lay_out_cache(tmp_path, {"config.json": tiny_checkpoint / "config.json"})
    tree = {"format_version": 1, "files": {
        "config.json": {"size": 1, "blob_id": "0" * 40},
        "model.safetensors": {"size": 1, "blob_id": "1" * 40, "lfs_sha256": "2" * 64, "lfs_size": 1},
    }}
    (snapshot.parent.parent / "trees").mkdir()
    (snapshot.parent.parent / "trees" / f"{COMMIT}.json").write_text(json.dumps(tree))
    start = time.monotonic()
    with pytest.raises(CheckpointError, match="IncompleteSnapshotError.*model.safetensors"):
        download_checkpoint(REPO, "step128", cache_dir=tmp_path, backoff_s=5)
    assert time.monotonic() - start < 2


def test_snapshot_without_weights_is_an_error(tmp_path, offline, tiny_checkpoint):
    lay_out_cache(tmp_path, {"config.json": tiny_checkpoint / "config.json"})
    with pytest.raises(CheckpointError, match="no weights"):
        download_checkpoint(REPO, "step128", cache_dir=tmp_path, model="pythia-tiny")


# -- retries ----------------------------------------------------------------------------------


def test_unreachable_hub_is_retried_then_reported(tmp_path, monkeypatch, caplog):
    # A real connection failure, not a mock: point huggingface_hub at a local port nobody
    # listens on. ENDPOINT, like HF_HUB_OFFLINE, is read from the environment at import.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)

    with caplog.at_level(logging.WARNING, logger="crosslayer.models.checkpoints"):
        with pytest.raises(CheckpointError) as caught:
            download_checkpoint(REPO, "step128", cache_dir=tmp_path, model="m", attempts=3, backoff_s=0.01)
    retries = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 2  # 3 attempts, 2 waits
    message = str(caught.value)
    assert "ConnectError" in message and "could not be reached in 3 attempts" in message


def _http_error(cls, status):
    response = httpx2.Response(status, request=httpx2.Request("GET", "https://huggingface.co/api/models/a/b"))
    return cls(f"{status} error", response=response)


def _chained(error, cause):
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (httpx2.ConnectError("refused"), True),
        (httpx2.ReadTimeout("slow"), True),
        (_http_error(HfHubHTTPError, 503), True),
        (_http_error(HfHubHTTPError, 429), True),
        (_http_error(HfHubHTTPError, 401), False),
        (_http_error(HfHubHTTPError, 403), False),
        (_http_error(RepositoryNotFoundError, 404), False),
        (_http_error(GatedRepoError, 403), False),
        (_http_error(RevisionNotFoundError, 404), False),
        (_http_error(RemoteEntryNotFoundError, 404), False),
        (OfflineModeIsEnabled("offline"), False),
        # snapshot_download's LocalEntryNotFoundError: retried only when the hub was unreachable
        (_chained(LocalEntryNotFoundError("not cached"), httpx2.ConnectError("refused")), True),
        (_chained(LocalEntryNotFoundError("not cached"), OfflineModeIsEnabled("offline")), False),
        (LocalEntryNotFoundError("local_files_only"), False),
        (ValueError("a bug"), False),
    ],
)
def test_which_hub_errors_are_transient(error, transient):
    assert _is_transient(error) is transient


def test_retries_transient_errors_then_succeeds():
    calls = []

    def flaky():
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise ConnectionError("connection reset by peer")
        return "done"

    assert _with_retries(flaky, attempts=5, backoff_s=0.01) == "done"
    assert len(calls) == 3
    assert calls[2] - calls[1] >= 0.02 > 0  # the second wait is twice the first (0.01 * 2**1)


def test_gives_up_after_attempts():
    calls = []

    def down():
        calls.append(1)
        raise TimeoutError("read timed out")

    with pytest.raises(TimeoutError):
        _with_retries(down, attempts=3, backoff_s=0.01)
    assert len(calls) == 3


def test_non_transient_errors_are_not_retried():
    calls = []

    def broken():
        calls.append(1)
        raise ValueError("not a network problem")

    with pytest.raises(ValueError):
        _with_retries(broken, attempts=5, backoff_s=10)
    assert len(calls) == 1


def test_retry_predicate_decides():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 2:
            raise KeyError("transient here")
        return len(calls)

    assert _with_retries(flaky, attempts=2, backoff_s=0, retry_on=lambda e: isinstance(e, KeyError)) == 2


# -- local and train sources ----------------------------------------------------------------


@pytest.mark.parametrize("source", ["local", "train"])
def test_manifest_for_local_and_train(tmp_path, tiny_checkpoint, source):
    out = tmp_path / "manifests" / f"{source}.json"
    manifest = write_manifest(out, model="tiny", step="64", source=source, checkpoint_dir=tiny_checkpoint)
    assert manifest == read_manifest(out)
    assert manifest["source"] == source and manifest["step"] == 64
    assert manifest["path"] == str(tiny_checkpoint.resolve())
    assert manifest["repo"] is manifest["revision"] is manifest["commit"] is None
    assert list(manifest["files"]) == sorted(p.name for p in tiny_checkpoint.iterdir())
    verify_manifest(manifest)

    (tiny_checkpoint / "generation_config.json").rename(tmp_path / "moved")
    try:
        with pytest.raises(CheckpointError, match="'tiny'.*generation_config.json.*missing"):
            verify_manifest(manifest)
    finally:
        (tmp_path / "moved").rename(tiny_checkpoint / "generation_config.json")


def test_a_checkpoint_inside_the_working_directory_is_recorded_relative_to_its_manifest(tmp_path, tiny_checkpoint,
                                                                                       monkeypatch):
    # the same bytes in any working directory, and a results tree that still reads after a move
    import shutil

    for run in ("a", "b"):
        shutil.copytree(tiny_checkpoint, tmp_path / run / "results/train/m/step0")
        monkeypatch.chdir(tmp_path / run)
        write_manifest("results/checkpoints/m/step0.json", model="m", step=0, source="train",
                       checkpoint_dir="results/train/m/step0")
    first, second = ((tmp_path / run / "results/checkpoints/m/step0.json").read_bytes() for run in ("a", "b"))
    assert first == second and json.loads(first)["path"] == "../../train/m/step0"
    (tmp_path / "a").rename(tmp_path / "moved")
    monkeypatch.chdir(tmp_path)
    manifest = read_manifest("moved/results/checkpoints/m/step0.json")
    assert manifest["path"] == str(tmp_path / "moved/results/train/m/step0")
    verify_manifest(manifest)
    # one outside the working directory keeps its absolute path
    write_manifest("out.json", model="m", step=0, source="local", checkpoint_dir=tiny_checkpoint)
    assert json.loads((tmp_path / "out.json").read_text())["path"] == str(tiny_checkpoint.resolve())


def test_missing_config_leaves_no_manifest(tmp_path):
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    out = tmp_path / "manifests" / "m.json"
    with pytest.raises(CheckpointError, match="config.json") as caught:
        write_manifest(out, model="tiny", step=0, source="train", checkpoint_dir=checkpoint)
    assert caught.value.model == "tiny"
    assert not out.exists()
    assert not (tmp_path / "manifests").exists() or not any((tmp_path / "manifests").iterdir())


def test_failed_write_keeps_previous_manifest(tmp_path, tiny_checkpoint):
    out = tmp_path / "m.json"
    old = write_manifest(out, model="tiny", step=0, source="local", checkpoint_dir=tiny_checkpoint)
    with pytest.raises(TypeError):  # not JSON-serialisable: fails halfway through the dump
        write_manifest(out, model="tiny", step=0, source="local", checkpoint_dir=tiny_checkpoint, repo=object())
    assert read_manifest(out) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m.json.stat", "m.json"]  # no temp file left


def test_unknown_source_is_rejected(tmp_path, tiny_checkpoint):
    with pytest.raises(ValueError, match="source"):
        write_manifest(tmp_path / "m.json", model="tiny", step=0, source="s3", checkpoint_dir=tiny_checkpoint)


# -- verification before every job ------------------------------------------------------------


#: The racy window in these tests: longer than any kernel's file-time tick (10 ms at HZ=100), short to wait out.
RACY_S = 0.05


def register(checkpoint, out, monkeypatch):
    """Register `checkpoint` once its files are past the racy window, so the stat cache records them."""
    import crosslayer.files

    monkeypatch.setattr(crosslayer.files, "RACY_NS", int(RACY_S * 1e9))
    time.sleep(RACY_S)
    write_manifest(out, model="m", step=1, source="local", checkpoint_dir=checkpoint, revision="step1")
    return out, checkpoint


@pytest.fixture
def registered(tmp_path, tiny_checkpoint, monkeypatch):
    import shutil

    checkpoint = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint, checkpoint)
    return register(checkpoint, tmp_path / "results" / "m" / "step1.json", monkeypatch)


@pytest.fixture
def hashed(monkeypatch):
    """The names of the files verification reads in full (the real sha256 is still computed)."""
    import crosslayer.files as files
    import crosslayer.models.checkpoints as module

    names, real = [], files.sha256
    for where in (module, files):
        monkeypatch.setattr(where, "sha256", lambda path: names.append(Path(path).name) or real(path))
    return names


def test_unchanged_files_are_not_hashed_again(registered, hashed):
    out, checkpoint = registered
    assert stat_cache_path(out) == out.parent / ".step1.json.stat"
    assert verified_manifest(out) == read_manifest(out)
    assert hashed == []
    stat_cache_path(out).unlink()  # a cache only: without it every file is hashed once more
    verified_manifest(out)
    assert sorted(hashed) == sorted(p.name for p in checkpoint.iterdir())
    hashed.clear()
    verified_manifest(out)
    assert hashed == []


def test_a_touched_file_is_hashed_once_and_accepted(registered, hashed):
    import os

    out, checkpoint = registered
    os.utime(checkpoint / "config.json", ns=(1, 1))
    time.sleep(RACY_S)  # past the racy window (test_a_file_changed_within_the_racy_window_...)
    verified_manifest(out)
    verified_manifest(out)
    assert hashed == ["config.json"]


@pytest.mark.parametrize("same_size", [True, False])
def test_a_replaced_weight_file_is_refused_by_name(registered, same_size):
    out, checkpoint = registered
    weights = checkpoint / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    weights.write_bytes(bytes(data) if same_size else bytes(data) + b"\0")
    with pytest.raises(CheckpointError) as caught:
        verified_manifest(out)
    message = str(caught.value)
    assert message.startswith(f"model 'm' revision 'step1' file '{weights}': sha256 is ")
    assert "run the workflow again: it registers the checkpoint anew" in message


def test_the_stat_cache_of_a_workflow_manifest_lies_outside_results(tmp_path, monkeypatch, tiny_checkpoint):
    # results/ holds the same bytes in every run of one config; a stat cache holds mtimes
    monkeypatch.chdir(tmp_path)
    out = Path("results/checkpoints/m/step1.json")
    write_manifest(out, model="m", step=1, source="local", checkpoint_dir=tiny_checkpoint)
    assert stat_cache_path(out) == tmp_path / ".crosslayer/stat/results/checkpoints/m/step1.json"
    assert stat_cache_path(out).is_file()
    assert [p.name for p in (tmp_path / "results").rglob("*") if p.is_file()] == ["step1.json"]


def test_changed_checkpoint_catches_any_replacement_whatever_its_mtime(registered, hashed):
    from crosslayer.files import changed_checkpoint

    out, checkpoint = registered
    assert changed_checkpoint(out) is None and hashed == []  # unchanged: one stat per file
    weights = checkpoint / "model.safetensors"
    before = weights.stat()
    os.utime(weights, ns=(1, 1))  # touched, same content: hashed once, then trusted again
    time.sleep(RACY_S)
    assert changed_checkpoint(out) is None and hashed == ["model.safetensors"]
    assert changed_checkpoint(out) is None and hashed == ["model.safetensors"]
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(before.st_atime_ns - 10**12, before.st_mtime_ns - 10**12))  # cp -p of an older file
    assert changed_checkpoint(out).startswith(f"{weights} has another sha256")
    weights.write_bytes(bytes(data[:-1]) + bytes([data[-1] ^ 1]))  # restored
    assert changed_checkpoint(out) is None
    (checkpoint / "tokenizer.json").write_text("{}")
    os.utime(checkpoint / "tokenizer.json", ns=(1, 1))
    assert changed_checkpoint(out) == f"{checkpoint / 'tokenizer.json'} was added"
    (checkpoint / "tokenizer.json").unlink()
    (checkpoint / "config.json").unlink()
    assert changed_checkpoint(out) == f"{checkpoint / 'config.json'} is gone"
    assert changed_checkpoint(out.parent / "no_such_manifest.json") is None  # nothing registered: nothing to redo


def test_snakemakes_directory_marker_is_not_part_of_a_checkpoint(registered):
    # An untrained twin is a directory() output, into which Snakemake writes its marker after the
    # job: counted as an added file, it re-registered the twin on every run (issue 39)
    from crosslayer.files import changed_checkpoint, checkpoint_files

    out, checkpoint = registered
    (checkpoint / ".snakemake_timestamp").touch()
    assert ".snakemake_timestamp" not in dict(checkpoint_files(checkpoint))
    assert changed_checkpoint(out) is None


def _flip_last_byte(path):
    data = bytearray(Path(path).read_bytes())
    data[-1] ^= 1
    return bytes(data)


def _in_place_mtime_restored(weights, tmp_path):  # edited in place, then touch -r / os.utime back
    before = weights.stat()
    with open(weights, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(_flip_last_byte(weights)[-1:])
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))


def _rewritten_mtime_restored(weights, tmp_path):  # truncated and written anew (same inode), mtime restored
    before = weights.stat()
    weights.write_bytes(_flip_last_byte(weights))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))


def _unpacked_with_normalised_mtime(weights, tmp_path):  # an archive's same-size file, both dated 1980-01-01
    other = tmp_path / "unpacked"
    other.write_bytes(_flip_last_byte(weights))
    os.utime(other, (315532800, 315532800))
    os.replace(other, weights)


def _renamed_over(weights, tmp_path):  # mv of another same-size file with the same mtime onto the name
    other = tmp_path / "other.safetensors"
    other.write_bytes(_flip_last_byte(weights))
    before = weights.stat()
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    other.rename(weights)


@pytest.mark.parametrize("change", [_in_place_mtime_restored, _rewritten_mtime_restored,
                                    _unpacked_with_normalised_mtime, _renamed_over])
def test_a_same_size_change_that_keeps_the_mtime_is_caught(tmp_path, tiny_checkpoint, monkeypatch, change):
    # Size and mtime cannot tell these apart; the ctime (set by the kernel, never by touch -r, cp -p,
    # rsync -t or tar) and the inode can (issue 39).
    import shutil

    from crosslayer.files import changed_checkpoint

    checkpoint = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint, checkpoint)
    weights = checkpoint / "model.safetensors"
    os.utime(weights, (315532800, 315532800))  # as unpacked from an archive with normalised mtimes
    out, _ = register(checkpoint, tmp_path / "results" / "m" / "step1.json", monkeypatch)
    assert changed_checkpoint(out) is None and verified_manifest(out)  # recorded in the stat cache
    size, mtime = weights.stat().st_size, weights.stat().st_mtime_ns
    change(weights, tmp_path)
    assert (weights.stat().st_size, weights.stat().st_mtime_ns) == (size, mtime)  # what the old check compared
    assert changed_checkpoint(out).startswith(f"{weights} has another sha256")
    with pytest.raises(CheckpointError, match="the file changed after the checkpoint was registered"):
        verified_manifest(out)


def test_a_file_changed_within_the_racy_window_is_not_trusted_from_the_cache(registered, hashed, monkeypatch):
    # A file changed moments before it was looked at could change again in the same tick of a coarse
    # file-system clock, keeping its ctime: the cache records it only once it is older than RACY_NS.
    import crosslayer.files

    out, checkpoint = registered
    config = checkpoint / "config.json"
    config.chmod(0o644)  # a metadata change: a new ctime, the same bytes
    monkeypatch.setattr(crosslayer.files, "RACY_NS", 10**12)
    verified_manifest(out)
    verified_manifest(out)
    assert hashed == ["config.json", "config.json"]  # too recent to trust: hashed at each look
    monkeypatch.setattr(crosslayer.files, "RACY_NS", int(RACY_S * 1e9))
    time.sleep(RACY_S)
    verified_manifest(out)
    verified_manifest(out)
    assert hashed == ["config.json"] * 3  # past the window: hashed once more, then trusted


def test_identical_steps_are_found_by_their_weight_files_whatever_the_rest():
    from crosslayer.models.checkpoints import identical_steps

    def manifest(step, weights, config="c"):
        files = {"config.json": config, **{f"model-0000{i}.safetensors": w for i, w in enumerate(weights)}}
        return {"step": step, "revision": f"step{step}", "files": files}

    manifests = [manifest(3000, ["b1", "b2"]), manifest(1000, ["a"]), manifest(2000, ["b2", "b1"], config="other"),
                 manifest(4000, ["b1", "b2"]), manifest(5000, ["c"])]
    assert identical_steps(manifests) == [
        {"step": 3000, "revision": "step3000", "same_as_step": 2000, "same_as_revision": "step2000", "sha256": "b1"},
        {"step": 4000, "revision": "step4000", "same_as_step": 2000, "same_as_revision": "step2000", "sha256": "b1"},
    ]
    assert identical_steps(manifests[1:2] + manifests[-1:]) == []
