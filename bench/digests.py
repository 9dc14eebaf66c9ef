"""What checking checkpoints' digests costs: on a finished run (every manifest under its
``results/checkpoints``) and projected to a 7B checkpoint from the sha256 throughput measured here.

A run pays, per checkpoint: one full hash at registration; at most one more, by the first check
that finds a file changed within the racy window (``crosslayer.files.RACY_NS``); and one ``stat`` per
file for every other check (each run before planning, each job that reads the checkpoint)."""

import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.jobs import job_seconds
from crosslayer.files import changed_checkpoint, read_manifest, sha256, stat_cache_path

#: Jobs that verify their checkpoint before reading it (models.checkpoints.verified_manifest).
READERS = ("mlp_alignment", "gated_alignment", "block_jacobians", "block_coupling", "projection_continuity")


def _gb_per_s(size=2**31):
    """sha256 throughput of this machine on a file of `size` bytes (page cache warm, as right after
    writing a checkpoint), best of 2."""
    with tempfile.NamedTemporaryFile(dir=".", delete=False) as f:
        f.write(os.urandom(2**24) * (size // 2**24))
    try:
        times = []
        for _ in range(2):
            start = time.perf_counter()
            sha256(f.name)
            times.append(time.perf_counter() - start)
        return size / min(times) / 1e9
    finally:
        os.unlink(f.name)


def bench_digests(run=".", seconds=None):
    """Print the digest cost of the finished run in `run` beside its job-seconds (and `seconds`,
    its wall time, when given), then the projection to 7B checkpoints."""
    run = Path(run)
    manifests = sorted((run / "results" / "checkpoints").rglob("step*.json"))
    if not manifests:
        raise SystemExit(f"no manifests under {run / 'results/checkpoints'}: run the workflow there first")
    cwd = os.getcwd()
    os.chdir(run)  # stat caches are relative to the run's directory
    try:
        files = [Path(manifest["path"], name) for manifest in map(read_manifest, manifests) for name in manifest["files"]]
        size = sum(path.stat().st_size for path in files)
        start = time.perf_counter()
        for path in files:
            sha256(path)
        full = time.perf_counter() - start
        checks = []
        for _ in range(5):
            start = time.perf_counter()
            assert all(changed_checkpoint(m) is None for m in manifests)
            checks.append(time.perf_counter() - start)
        cached = all(stat_cache_path(m).is_file() for m in manifests)
    finally:
        os.chdir(cwd)
    jobs = job_seconds(run / "benchmarks")
    readers = sum(len(jobs.get(rule, [])) for rule in READERS)
    check = statistics.median(checks) / len(manifests)  # one manifest's stat check
    # registration, the racy re-hash at most once, a check before each of 2 plans and in every reader
    cost = 2 * full + (2 * len(manifests) + readers) * check
    total = sum(sum(v) for v in jobs.values())
    print(f"#### digests of {len(manifests)} checkpoints, {len(files)} files, {size / 2**20:.1f} MiB "
          f"({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores)")
    print("| full hash of all (s) | stat check per checkpoint (ms) | stat cache present | jobs that verify | "
          "digest cost, upper bound (s) | run's job-seconds | share |" + (" run's wall (s) | share of wall |" if seconds else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|" if seconds else ""))
    print(f"| {full:.3f} | {1e3 * check:.3f} | {cached} | {readers} | {cost:.2f} | {total:.0f} | {cost / total:.2%} |"
          + (f" {seconds:.0f} | {cost / seconds:.2%} |" if seconds else ""))
    rate = _gb_per_s()
    print(f"\n#### sha256 here: {rate:.2f} GB/s; a 7B checkpoint")
    print("| weights | size (GB) | one full hash (s) | registration + racy re-hash (s) |")
    print("|---|---|---|---|")
    for dtype, nbytes in (("bfloat16", 2), ("float32", 4)):
        size = 7e9 * nbytes / 1e9
        print(f"| {dtype} | {size:.0f} | {size / rate:.0f} | {2 * size / rate:.0f} |")
