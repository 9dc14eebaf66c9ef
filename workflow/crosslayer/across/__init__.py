"""Across papers: the four papers' measures of adjacent-layer geometry on one boundary table.

:mod:`~crosslayer.across.catalog` names the measures; :mod:`~crosslayer.across.measures` reads each
paper's per-checkpoint results into per-boundary values with their random baselines;
:mod:`~crosslayer.across.tables` joins them, correlates them along depth, finds when each leaves its
step-0 band, and compares models; :mod:`~crosslayer.across.plots` draws them.
"""
