"""Paper 000, cross-layer alignment of MLP weight products: measurement, tables, figures.

Per-checkpoint jobs, each ``measure_*checkpoint(manifest, settings, ...)`` with an
:class:`~crosslayer.alignment.measure.AlignmentSettings` (the rules' params), which loads the checkpoint
its manifest describes, runs the in-memory function named after the rule, and raises
:class:`~crosslayer.errors.CheckpointError` naming model, revision and file:

* ``mlp_alignment``: :func:`crosslayer.alignment.measure.measure_checkpoint` (the weights alone),
  in memory :func:`~crosslayer.alignment.measure.mlp_alignment`;
* ``gated_alignment``: :func:`crosslayer.alignment.gated.measure_gated_checkpoint` (the weights and
  the dynamics stage's activations), in memory :func:`~crosslayer.alignment.gated.gated_alignment`.
"""
