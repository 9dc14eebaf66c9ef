"""Errors a user can act on (each names the model, revision and file involved), and the one warning the
analyses give about usable but degenerate input."""

from contextlib import contextmanager

__all__ = ["CheckpointError", "CorruptFileError", "DegenerateInputWarning", "naming_checkpoint", "shorten"]


def shorten(text, limit=200):
    """`text` cut to `limit` characters, saying how long it was: a message that can carry a file's
    content (a parser's) stays a few hundred characters (a malformed 300 MB tokenizer.json once made
    a 629 MB job log).

    >>> shorten("x" * 1000, 10)
    'xxxxxxxxxx... (1,000 characters)'
    """
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class CheckpointError(RuntimeError):
    """A checkpoint cannot be downloaded, read or used.

    The message starts with whichever of model, revision and file are known, e.g.
    ``model 'pythia-410m' revision 'step128' file 'model.safetensors': tensor ... missing``.
    """

    def __init__(self, message, *, model=None, revision=None, file=None):
        self.message, self.model, self.revision, self.file = message, model, revision, file
        where = " ".join(
            f"{name} '{value}'"
            for name, value in (("model", model), ("revision", revision), ("file", file))
            if value is not None
        )
        super().__init__(f"{where}: {message}" if where else message)

    def with_context(self, *, model=None, revision=None, file=None):
        """Return a copy with missing context filled in (keeps what is already known)."""
        return CheckpointError(
            self.message,
            model=self.model or model,
            revision=self.revision or revision,
            file=self.file or file,
        )


@contextmanager
def naming_checkpoint(manifest, *, file=None):
    """Make every refusal raised inside name the checkpoint: a ``ValueError`` (bad input, a non-finite
    value, too small a rank) or ``NotImplementedError`` (a family or variant without support) becomes
    a :class:`CheckpointError` naming its model, revision and file, as does a :class:`CheckpointError`
    that names none of them; one that names any (the loaders') passes unchanged.

    Parameters
    ----------
    manifest : dict
        The checkpoint's manifest (``model``, optional ``revision``, ``path``).
    file : str or path-like, optional
        The file to name instead of the checkpoint's path (e.g. an input the checkpoint is run on).

    Example
    -------
    >>> try:
    ...     with naming_checkpoint({"model": "m", "revision": "step7", "path": "ckpt"}):
    ...         raise ValueError("layer 3: not finite")
    ... except CheckpointError as err:
    ...     print(err)
    model 'm' revision 'step7' file 'ckpt': layer 3: not finite
    """
    where = {"model": manifest["model"], "revision": manifest.get("revision"),
             "file": str(manifest["path"] if file is None else file)}
    try:
        yield
    except CheckpointError as err:
        if err.model is not None or err.revision is not None or err.file is not None:
            raise
        raise err.with_context(**where) from err
    except (ValueError, NotImplementedError) as err:
        raise CheckpointError(str(err), **where) from err


class CorruptFileError(RuntimeError):
    """An input file of a job is truncated or corrupt (a full disk, a copy cut short): the message names
    it and says how to have it made again, which Snakemake does not do by itself (the file is there,
    and no newer than its inputs)."""

    def __init__(self, path, reason):
        self.path = str(path)
        super().__init__(f"{path} is truncated or corrupt ({reason}): run snakemake --force {path} (with this "
                         "run's other options: --cores, --configfile, --profile), which remakes it with the job that "
                         "wrote it, then run snakemake again. Deleting it is not enough: once later results exist, "
                         "Snakemake plans nothing to remake it")


class DegenerateInputWarning(UserWarning):
    """The input is usable but degenerate: a result is less reliable, or a statistic is undefined for it
    and comes back NaN."""
