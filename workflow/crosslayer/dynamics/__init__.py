"""Paper 004, topology and dynamics of the residual stream: per-checkpoint Jacobian statistics, their
spectral geometry, depth regimes, topology, the topology-dynamics tests, figures.
"""
