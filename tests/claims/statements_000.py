"""Paper 000's headline findings as the paper states them, read off its text by hand: claim id ->
(kind, direction, the quote's words that state a size or None) of the catalogue entry, None for
a claim beyond the workflow's tables."""

STATEMENTS = {
    "000-init-chance": ("threshold", "==", None),  # "overlap no more than random chance predicts": at chance
    "000-early-above-chance": ("threshold", ">", "well above"),  # "align well above the random baseline"
    "000-early-surge": ("change", ">", None),  # "this overlap surges"
    "000-cascade-order": ("trend", ">", None),  # final pair peaks first, the others later
    "000-cascade-magnitude": ("trend", "<", None),  # "weakening with distance from the final-pair boundary"
    "000-gelu-maintains": ("change", ">=", None),  # "increase or stabilize"
    "000-swiglu-dissolves": ("change", "<", None),  # "lose alignment"
    "000-swiglu-progressive": ("trend", "<", None),  # "progressively dissolve it": falls checkpoint by checkpoint
    "000-activation-divergence": ("contrast", ">", None),  # GELU keep, SwiGLU lose
    "000-not-ordering": ("contrast", ">", None),  # sequential GELU keeps, sequential SwiGLU loses
    "000-early-boundaries-fall-back": None,
    "000-before-induction-heads": None,
    "000-surge-settles": ("change", "==", None),  # "stabilizes or mildly recedes" after step 2,000
    "000-swiglu-distant-to-baseline": ("change", "<", None),  # distance-5 overlap "approaches the random baseline"
}
