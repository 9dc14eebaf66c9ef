"""Paper 002, transformer block coupling: the coupling measure, per-checkpoint glue, token trajectories,
tables, figures.

Per-checkpoint job ``block_coupling``: :func:`crosslayer.coupling.checkpoint.measure_checkpoint`
(``manifest, settings`` with a :class:`~crosslayer.coupling.checkpoint.CouplingSettings`, the rule's
params, and the prompt file), which loads the checkpoint its manifest describes, runs the in-memory
function named after the rule, :func:`~crosslayer.coupling.checkpoint.block_coupling`, and raises
:class:`~crosslayer.errors.CheckpointError` naming model, revision and file.
"""
