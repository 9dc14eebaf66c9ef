"""Model access: model families (adapters), weights read from checkpoint files, checkpoints and their
manifests, strict loading, recorded block calls, the residual stream, and training tiny models.
"""
