"""Paper 004, topology and dynamics of the residual stream: per-checkpoint Jacobian statistics, their
spectral geometry, depth regimes, topology, the topology-dynamics tests, figures.

Per-checkpoint job ``block_jacobians``: :func:`crosslayer.dynamics.checkpoint.measure_checkpoint`
(``manifest, settings`` with a :class:`~crosslayer.dynamics.checkpoint.JacobianSettings`, the rule's
params, and the samples file) loads the checkpoint its manifest describes once and runs its two
steps in order, returning both results: the activations (the residual stream at the texts
:func:`~crosslayer.dynamics.checkpoint.sample_token_ids` chooses, recorded by
:func:`~crosslayer.models.residual.record_residual_stream`), then the Jacobian statistics there (in
memory :func:`~crosslayer.dynamics.checkpoint.block_jacobian_stats`). Errors are
:class:`~crosslayer.errors.CheckpointError` naming model, revision and file (the samples file where
too few of its texts are long enough).
"""
