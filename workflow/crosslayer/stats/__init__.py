"""Statistics: permutation tests, activation-correlation graphs, communities.
"""
