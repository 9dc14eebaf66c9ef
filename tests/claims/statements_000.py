"""Paper 000's headline findings as the paper states them, read off its text by hand: claim id ->
(kind, direction) of the catalogue entry, None for a claim beyond the workflow's tables."""

STATEMENTS = {
    "000-init-chance": ("threshold", "<="),  # "overlap no more than random chance predicts"
    "000-early-above-chance": ("threshold", ">"),  # "align well above the random baseline"
    "000-early-surge": ("change", ">"),  # "this overlap surges"
    "000-cascade-order": ("trend", ">"),  # final pair peaks first, the others later
    "000-cascade-magnitude": ("trend", "<"),  # "weakening with distance from the final-pair boundary"
    "000-gelu-maintains": ("change", ">="),  # "increase or stabilize"
    "000-swiglu-dissolves": ("change", "<"),  # "lose alignment"
    "000-activation-divergence": ("contrast", ">"),  # GELU keep, SwiGLU lose
    "000-not-ordering": ("contrast", ">"),  # sequential GELU keeps, sequential SwiGLU loses
    "000-early-boundaries-fall-back": None,
    "000-before-induction-heads": None,
}
