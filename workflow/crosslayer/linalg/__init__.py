"""Linear algebra shared by the papers: subspaces and their overlaps, top-K singular vectors, per-sample
conditioning, effective rank, Schur surgery.
"""
