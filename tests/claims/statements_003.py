"""Paper 003's headline findings as the paper states them, read off its text by hand: claim id ->
(kind, direction, the quote's words that state a size or None) of the catalogue entry, None for
a claim beyond the workflow's tables."""

STATEMENTS = {
    # "Q, K, Gate, and Up (which read from the residual stream) develop input-space" continuity:
    # input-space above output-space
    "003-readers-input-space": ("change", ">", None),
    # "Gate develops input-space continuity from the MLP activation": input above output
    "003-gate-input-space": ("change", ">", None),
    # "O and Down (which write to it) develop output-space" continuity: output above input
    "003-writers-output-space": ("change", ">", None),
    # "V alone ... develops only low continuity", "V shows the lowest": V below K
    "003-v-low": ("change", "<", None),
    # "continuity arises from learning itself": trained above initialisation
    "003-learned": ("change", ">", None),
    # "Residual connections create gradient coherence from initialization": Res above NoRes
    "003-toy-residual-coherence": ("change", ">", None),
    # Res+None "develops only weak weight continuity": Res+ReLU above Res+None
    "003-toy-res-none-weak": ("change", ">", "far below"),
    # a rotation-preserving activation "fails to retain continuity": ReLU above Radial
    "003-toy-radial-fails": ("change", ">", "fails to retain"),
    # "normalization distributes it across multiple directions": LN's sigma²-WA above ReLU's
    "003-toy-ln-distributes": ("change", ">", None),
    # "it collapses as layers' rotation frames drift apart": weight continuity falls after forming
    "003-toy-drift": ("change", "<", None),
    "003-toy-relu-retains": ("change", ">", None),  # "Res+ReLU ... maintains [continuity] throughout 50 epochs"
    # "Ablating MLP activation drops Gate continuity": no activation below SiLU
    "003-ablation-gate-drops": ("change", "<", None),
    "003-ablation-failure": None,
    "003-continuity-above-chance": ("threshold", ">", None),  # "principal singular vectors ... point in similar directions"
    "003-q-input-space": ("change", ">", None),  # Q "develop[s] input-space" continuity
    "003-up-input-space": ("change", ">", None),  # Up likewise
    "003-o-output-space": ("change", ">", None),  # O "develop[s] output-space" continuity
    "003-toy-nores-weights-far-below": ("change", ">", "far below"),  # without residual: "far below"
    "003-toy-full-transfer": ("threshold", "==", None),  # weight = the cumulative gradient's direction: Delta ~ 0
    "003-toy-drift-erases": ("change", ">", "erases"),  # "drift erases it before reaching the weight"
    "003-toy-radial-like-none": ("change", "==", None),  # Res+None and Res+Radial agree
    "003-toy-gradient-precedes": ("change", ">", None),  # "gradient continuity precedes weight continuity"
    "003-toy-init-scale": ("change", ">", None),  # "shrinking the initialization ... recovers"
    "003-toy-tanh-lower": ("change", ">", None),  # Tanh "yielding lower continuity"
    "003-toy-activation-concentrates": ("change", ">", None),  # "Activation concentrates continuity"
    "003-toy-ln-breaks-symmetry": ("change", ">", None),  # "LayerNorm also breaks rotational symmetry"
    "003-saturates-early": None,
    "003-toy-weights-follow-cumulative": ("change", ">", None),  # weight "emerges as the principal direction" of Gcum
}
