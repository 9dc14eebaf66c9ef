"""Shared start of every rule script: log to the job's log file and make `crosslayer` importable."""

import logging
import os
import sys
import threading
import time
from pathlib import Path

# Worker threads of the math libraries sleep when idle instead of spinning: a spinning thread holds
# a core it has no work for, and where the cores are shared (a busy neighbour, other jobs) the thread
# with work waits for it. A 2-thread schur_surgery job spent 1,368 s of CPU, against 206 s alone,
# for the same bytes (issue 49; docs/benchmarks.md, "Idle threads"). Read once, when each
# library loads: Snakemake's script preamble imports neither numpy nor torch, so start() is early
# enough. A user's own values win.
PASSIVE_THREADS = {
    "OMP_WAIT_POLICY": "PASSIVE",      # OpenMP: GNU (torch's wheels, MKL inside them), LLVM, Intel
    "GOMP_SPINCOUNT": "0",             # GNU OpenMP, the same said twice
    "KMP_BLOCKTIME": "0",              # LLVM and Intel OpenMP (libomp, libiomp5: conda builds, MKL's)
    "OPENBLAS_THREAD_TIMEOUT": "4",    # OpenBLAS (numpy, scipy): spin 2^4 cycles, not 2^28, then sleep
}


def start(snakemake):
    """Send stderr (tracebacks, progress bars, logging) to the job's log file; date files that
    carry a creation date (PDF figures) from SOURCE_DATE_EPOCH, the epoch unless set: same
    config, same bytes; let idle math-library threads sleep (PASSIVE_THREADS); end the job if
    Snakemake is killed. Call before importing numpy, scipy or torch."""
    os.environ.setdefault("SOURCE_DATE_EPOCH", "0")
    for name, value in PASSIVE_THREADS.items():
        os.environ.setdefault(name, value)
    sys.stderr = open(snakemake.log[0], "w", buffering=1)
    sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # float32 sums split across threads round differently: the thread count belongs with the numbers
    logging.info("rule %s, %d thread(s)", snakemake.rule, snakemake.threads)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent):
    # A Snakemake killed hard (SIGKILL, a lost session) cannot stop its jobs: an orphan would go on
    # computing, holding the GPU and writing outputs that no run trusts. Reparented means orphaned.
    while os.getppid() == parent:
        time.sleep(0.2)
    logging.error("Snakemake (pid %d) is gone: stopping this job, whose outputs the next run redoes", parent)
    os._exit(1)
