"""Paper 002, transformer block coupling: the coupling measure, per-checkpoint glue, token trajectories,
tables, figures.
"""
