"""Paper 003, geometric continuity across depth: measurement, tables, the toy residual MLP, figures.

Per-checkpoint job ``projection_continuity``: :func:`crosslayer.continuity.measure.measure_checkpoint`
(``manifest, settings`` with a :class:`~crosslayer.continuity.measure.ContinuitySettings`, the rule's
params), which reads the checkpoint its manifest describes one layer at a time, runs the in-memory
function named after the rule, :func:`~crosslayer.continuity.measure.projection_continuity`, and raises
:class:`~crosslayer.errors.CheckpointError` naming model, revision and file. The ablations' job
``ablation_continuity`` is the same over every checkpoint of a training run,
:func:`~crosslayer.continuity.measure.measure_run`.
"""
