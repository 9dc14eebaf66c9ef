"""Shared start of every rule script: log to the job's log file and make `crosslayer` importable."""

import logging
import os
import sys
import threading
import time
from pathlib import Path


def start(snakemake):
    """Send stderr (tracebacks, progress bars, logging) to the job's log file; date files that
    carry a creation date (PDF figures) from SOURCE_DATE_EPOCH, the epoch unless set: same
    config, same bytes; end the job if Snakemake is killed."""
    os.environ.setdefault("SOURCE_DATE_EPOCH", "0")
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
