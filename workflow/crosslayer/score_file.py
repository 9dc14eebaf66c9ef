"""Reading ``coupling.scores``, a benchmark CSV of one score per model, strictly: a score must be the
configured model's, at the checkpoint its coupling is measured at, and only one. Standard library
only, so the Snakefile can read it before any job.

Errors are ``ValueError`` whose message starts with ``coupling.scores:`` and names the file and line.
"""

import csv
import math
import os

from crosslayer.errors import shorten

__all__ = ["SCORE_COLUMNS", "CHECKPOINT_COLUMNS", "MAX_SCORES_BYTES", "read_scores", "cut"]

#: The columns every scores file has.
SCORE_COLUMNS = ("model", "score")
#: Optional columns that say which checkpoint a row scored; checked against the coupling's last one.
CHECKPOINT_COLUMNS = ("step", "revision")
#: A table of one row per model; a larger file is no scores table (and would be read into memory whole).
MAX_SCORES_BYTES = 4 * 2**20


def cut(text, limit=80):
    """`text` as ``repr``, cut to about `limit` characters: a file's content reaches error messages
    only this long (a malformed 300 MB file must not become a 300 MB message)."""
    return shorten(repr(text), limit)


def read_scores(path, *, models, complete=True, checkpoints=None):
    """``{model: score}`` from a benchmark CSV with columns ``model`` and ``score``, and optionally
    ``step`` and ``revision``: the checkpoint each row scored.

    Parameters
    ----------
    path : str or path-like
    models : iterable of str
        The configured models; rows of other models are ignored (a leaderboard export may list many).
    complete : bool, default=True
        Every one of `models` must have a row (False when the benchmarks stage fills in the others).
    checkpoints : dict, optional
        model -> ``(step, revision)`` of the checkpoint its coupling is measured at (its last);
        `revision` is None for models not read from the hub. Where the file has a ``step`` or
        ``revision`` column, each configured model's row must state that checkpoint.

    Returns
    -------
    dict[str, float]
        The finite score of each of `models` the file has.

    Raises
    ------
    ValueError
        The file is unreadable or too large; it has a column beyond :data:`SCORE_COLUMNS` and
        :data:`CHECKPOINT_COLUMNS` or one twice; a model has two rows; a score is not a finite number;
        a row's checkpoint is not the coupling's; a configured model has no row while `complete`.
    """
    models, where = list(models), f"coupling.scores: {path}"
    try:
        if os.path.getsize(path) > MAX_SCORES_BYTES:
            raise ValueError(f"{where} is {os.path.getsize(path):,} bytes, more than a table of one score per model "
                             f"needs ({MAX_SCORES_BYTES:,} at most): point coupling.scores at the scores CSV")
        # utf-8-sig: Excel's "CSV UTF-8" starts with a byte-order mark, which would stick to "model"
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            rows = list(reader)
    except OSError as err:
        raise ValueError(f"coupling.scores: cannot read {path}: {err.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{where} cannot be read as a UTF-8 CSV file ({cut(str(err))})") from None
    header = [name.strip() for name in header]
    if not set(SCORE_COLUMNS) <= set(header):
        raise ValueError(f"{where} needs a header with columns model,score (optionally step, revision); it has "
                         f"{cut(header)}")
    if unknown := [name for name in header if name not in (*SCORE_COLUMNS, *CHECKPOINT_COLUMNS)]:
        raise ValueError(f"{where}: column(s) {cut(unknown)} are not model, score, step or revision: a score of "
                         "another kind or checkpoint would be read as the model's; remove them")
    if len(set(header)) < len(header):
        raise ValueError(f"{where}: a column is named twice in its header {cut(header)}")
    scores, lines = {}, {}
    for line, cells in enumerate(rows, start=2):
        if not any(cell.strip() for cell in cells):
            continue  # a blank line
        if len(cells) != len(header):
            raise ValueError(f"{where} line {line}: {len(cells)} cells under a header of {len(header)} columns")
        row = {name: cell.strip() for name, cell in zip(header, cells)}
        model = row["model"]
        if model in lines:  # any model: which of two rows is meant cannot be told
            raise ValueError(f"{where} lines {lines[model]} and {line} both give model {cut(model)}: keep one row "
                             "per model")
        lines[model] = line
        if model not in models:
            continue
        try:
            value = float(row["score"])
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(f"{where} line {line}: score {cut(row['score'])} of model {model!r} is not a number")
        _check_checkpoint(row, checkpoints.get(model) if checkpoints else None, where=f"{where} line {line}")
        scores[model] = value
    missing = [m for m in models if m not in scores]
    if missing and complete:
        raise ValueError(f"{where} has no score for model(s) {missing}; add a row per configured model (column "
                         "model holds the id used under models:), or turn on benchmarks to score them")
    return scores


def _check_checkpoint(row, checkpoint, *, where):
    """A row's ``step`` and ``revision``, where the file states them, are those of `checkpoint`."""
    if checkpoint is None:
        return
    step, revision = checkpoint
    model = row["model"]
    if "step" in row:
        try:
            stated = int(row["step"])
        except ValueError:
            raise ValueError(f"{where}: step {cut(row['step'])} of model {model!r} is not an integer (the "
                             f"training step scored; its coupling is measured at step {step})") from None
        if stated != step:
            raise ValueError(f"{where}: model {model!r} was scored at step {stated}, but its coupling is measured at "
                             f"its last checkpoint, step {step}: give the score of step {step}")
    if "revision" in row:
        stated = row["revision"]
        if revision is None and stated:
            raise ValueError(f"{where}: model {model!r} is not read from the hub, so it has no revision "
                             f"({cut(stated)}): leave its revision empty (its step says the checkpoint)")
        if revision is not None and stated != revision:
            raise ValueError(f"{where}: model {model!r} was scored at revision {cut(stated)}, but its coupling is "
                             f"measured at its last checkpoint, revision {revision!r}: give the score of that one")
