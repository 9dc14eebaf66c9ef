"""How well each checkpoint models language: a performance axis for the papers' generalization claims.

* ``heldout_loss`` (per checkpoint): :func:`crosslayer.evaluation.heldout.measure_checkpoint`, the mean
  next-token loss, perplexity and bits per byte on a fixed held-out text set;
  ``summarize_heldout`` (per model): :func:`crosslayer.evaluation.heldout.heldout_table`.
"""
