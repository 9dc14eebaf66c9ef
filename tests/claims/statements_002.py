"""Paper 002's headline findings as the paper states them, read off its text by hand: claim id ->
(kind, direction) of the catalogue entry, None for a claim beyond the workflow's tables. Coupling is
the negative mis-coupling (Section 5.4), so "coupling emerges" is a rise; linearity is a low
line-shape score, exponential growth a low expodistance."""

STATEMENTS = {
    "002-depth-emerges": ("change", ">"),  # "coupling across depth emerges through training"
    "002-depth-rises-over-training": ("trend", ">"),  # "low at initialization and increases persistently"
    "002-depth-locality": ("trend", "<"),  # "more pronounced between adjacent layers": falls with distance
    "002-token-self-emerges": ("change", ">"),  # "no such coupling is present at initialization"
    "002-lss-trained-below-untrained": ("change", "<"),  # LSS "4.25 in trained models" vs "6.54 at initialization"
    "002-linearity-over-training": ("trend", "<"),  # "Linearity ... emerges with training": LSS falls
    "002-exponential-growth-emerges": ("change", "<"),  # "exponential growth that emerges with training": ED falls
    "002-coupling-performance": ("trend", ">"),  # "a positive correlation between coupling and ... scores"
    "002-coupling-beats-size": None,
    "002-parallels-accuracy": ("trend", "<"),  # coupling's growth "parallels the ... increase in accuracy": loss falls
    "002-noise-recovers": ("change", ">"),  # "significantly lower at the first layer": the last layer's is higher
    "002-vit-stochastic-depth": None,
}
