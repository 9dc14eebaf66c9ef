"""Paper 003, geometric continuity across depth: measurement, tables, the toy residual MLP, figures.
"""
