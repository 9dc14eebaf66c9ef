"""The held-out table of a model: one row per checkpoint (pandas only, for the summarizing job)."""

import pandas as pd

__all__ = ["HELDOUT_COLUMNS", "heldout_table"]

#: A checkpoint's held-out row, in order (the table adds ``step`` first).
HELDOUT_COLUMNS = ("loss", "perplexity", "bits_per_byte", "n_tokens", "n_bytes", "n_windows", "context")


def heldout_table(rows):
    """``{step: row}`` -> one table sorted by step, columns ``step`` and :data:`HELDOUT_COLUMNS`."""
    table = pd.DataFrame([{"step": int(step), **row} for step, row in rows.items()], columns=["step", *HELDOUT_COLUMNS])
    return table.sort_values("step", kind="stable").reset_index(drop=True)
