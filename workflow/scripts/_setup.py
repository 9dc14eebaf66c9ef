"""Shared start of every rule script: log to the job's log file and make `crosslayer` importable."""

import logging
import os
import sys
from pathlib import Path


def start(snakemake):
    """Send stderr (tracebacks, progress bars, logging) to the job's log file; date files that
    carry a creation date (PDF figures) from SOURCE_DATE_EPOCH, the epoch unless set: same
    config, same bytes."""
    os.environ.setdefault("SOURCE_DATE_EPOCH", "0")
    sys.stderr = open(snakemake.log[0], "w", buffering=1)
    sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
