"""The benchmarks: tables of our method against the papers' or the released code's, side by side
(``python -m bench <name>`` from the repository root; ``make bench``). Not part of the library.
"""
