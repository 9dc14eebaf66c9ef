"""Paper 000, cross-layer alignment of MLP weight products: measurement, tables, figures.
"""
