"""Paper 002's headline findings as the paper states them, read off its text by hand: claim id ->
(kind, direction, the quote's words that state a size or None) of the catalogue entry, None for
a claim beyond the workflow's tables. Coupling is the negative mis-coupling (Section 5.4), so
"coupling emerges" is a rise; linearity is a low line-shape score, exponential growth a low
expodistance."""

STATEMENTS = {
    "002-depth-emerges": ("change", ">", None),  # "coupling across depth emerges through training"
    "002-depth-rises-over-training": ("trend", ">", None),  # "low at initialization and increases persistently"
    "002-depth-locality": ("trend", "<", None),  # "more pronounced between adjacent layers": falls with distance
    "002-locality-grows": ("trend", "<", None),  # "becomes more pronounced ... with training": the trend falls
    "002-token-self-emerges": ("change", ">", None),  # "no such coupling is present at initialization"
    # LSS "4.25 in trained models" vs "6.54 at initialization"
    "002-lss-trained-below-untrained": ("change", "<", None),
    "002-linearity-over-training": ("trend", "<", None),  # "Linearity ... emerges with training": LSS falls
    # "exponential growth that emerges with training": ED falls
    "002-exponential-growth-emerges": ("change", "<", None),
    "002-coupling-performance": ("trend", ">", None),  # "a positive correlation between coupling and ... scores"
    "002-coupling-beats-size": ("trend", ">", None),  # "more strongly correlated ... than parameter budget"
    # coupling's growth "parallels the ... increase in accuracy": loss falls
    "002-parallels-accuracy": ("trend", "<", None),
    "002-noise-recovers": ("change", ">", None),  # "significantly lower at the first layer": the last layer's is higher
    "002-vit-stochastic-depth": None,
    "002-coupling-beats-depth": ("trend", ">", None),  # "more strongly correlated ... than ... model depth"
    "002-coupling-beats-width": ("trend", ">", None),  # "... than ... token embedding dimension"
    "002-fixed-input-emerges": ("change", ">", None),  # "Untrained models ... show no such coupling"
    "002-fixed-output-emerges": ("change", ">", None),  # "At initialization ... no such coupling across tokens"
    "002-sv-scaling-untrained": ("trend", ">", None),  # inverse depth scaling "more present in untrained"
}
