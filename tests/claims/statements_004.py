"""Paper 004's headline findings as the paper states them, read off its text by hand: claim id ->
(kind, direction, the quote's words that state a size or None) of the catalogue entry, None for
a claim beyond the workflow's tables."""

STATEMENTS = {
    # "about 98% of the eigenvalues ... come as complex conjugate pairs"
    "004-complex-pairs": ("threshold", "==", None),
    # "from non-normal, rotation-dominated early layers to near–symmetric late layers"
    "004-symmetry-gradient": ("trend", ">", None),
    "004-training-rotates-mid": ("change", "<", None),  # "pulling early and mid layers toward rotation"
    # "funnels perturbations": fewer dimensions at full composition than the single layer
    "004-funnel-depth": ("change", "<", None),
    "004-funnel-learned": ("change", "<", None),  # "at OLMo step 0 effective rank stays high"; trained it "falls"
    # bottleneck "largely dissolved when structured non-normality is removed"
    "004-schur-dissolves": ("change", ">", None),
    "004-forward-at-baseline": ("threshold", "<=", None),  # "at or near the random baseline": "Largely not" coordinated
    "004-mesoscale-at-init": ("threshold", ">", None),  # "Communities capture Jacobian variance even at initialization"
    "004-boundary-trained": ("threshold", ">", None),  # boundary nodes "are preferentially amplified or suppressed"
    "004-boundary-emerges": ("change", ">", None),  # "absent at initialization and emerges monotonically over training"
    "004-boundary-absent-at-init": ("threshold", "==", None),  # "This coupling is absent at initialization"
    # "amplified at near-symmetric layers and de-amplified at non-normal ones"
    "004-sign-by-operator": ("trend", ">", None),
    # "at chance in every model and checkpoint": no association, within the null's spread
    "004-rate-level-null": ("trend", "==", None),
    "004-gradient-in-trained": ("trend", ">", None),  # "a monotonic non-normality gradient" in trained models
    "004-henrici-falls": ("trend", "<", None),  # "the Henrici departure falls in lockstep"
    "004-identity-dominates": ("trend", "<", None),  # the residual norm ratio "declines"
    "004-training-rotates-early": ("change", "<", None),  # "pulling early ... layers toward rotation"
    "004-mid-expanding-collapse": ("threshold", "==", None),  # mid layers' expanding fraction "to 17-30%"
    "004-forward-random-at-init": ("threshold", "==", None),  # "exactly random at initialization"
    "004-mesoscale-rises": ("trend", ">", None),  # "explained variance rising over the layers"
    "004-sign-absent-at-init": ("trend", "==", None),  # "a relationship absent at initialization"
    "004-late-ceiling-kept": ("change", "==", None),  # "Training leaves the late ceiling near-symmetric"
    "004-regimes-at-init": ("trend", ">", None),  # "Depth regimes ... are largely architectural": at step 0
    "004-coordination-mid": ("change", ">", None),  # "Training installs inter-layer coordination" in J - I
    "004-collapse-at-large-radii": None,
    # "ruled out that the dimensionality collapse relies on the Jacobian's Frobenius-mass": a random
    # non-normal part of the same mass (control A) collapses less than the trained one
    "004-schur-controls": ("threshold", ">", None),
    "004-detectors-agree": None,
    "004-skip-control": None,
    "004-symmetry-tracks-identity": ("trend", "<", None),  # symmetry "tracks the residual norm ratio"
}
