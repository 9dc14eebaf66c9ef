"""Paper 004's tables: what the dynamics stage writes per checkpoint (``jacobian_spectra``'s
``step{step}.spectra.tsv``, ``schur_surgery``'s ``step{step}.schur.tsv``) and per model
(``dynamics_regimes``' ``regimes.tsv``), and what the topology stage writes per checkpoint
(``topology_statistics``' ``step{step}.coupling.tsv`` and ``step{step}.summary.tsv``), with the
samples and units of the activations its graphs come from (the header of ``block_jacobians``'
``step{step}.activations.npz``).

Each reader selects columns and adds ``step`` to the per-checkpoint files; nothing is recomputed.
The spectra and regime tables are cut to the columns the catalogue declares: the per-sample
quartiles (``q25_condition_number`` ...) are left out because ``dynamics.condition_number: false``
drops some of them, so a fixed column set could not be promised. The spectra files' alignment
baseline (the same on every layer row) is its own table, ``dynamics/baseline``, one row per
checkpoint, for claims that compare with it; the spectra table repeats ``layer`` as ``depth``.
"""

import zipfile

import numpy as np
import pandas as pd

from crosslayer.claims.readers.base import BOUNDARIES, Reader

_SPECTRA = "results/dynamics/{model}/step{step}.spectra.tsv"
_REGIMES = "results/dynamics/{model}/regimes.tsv"
_SCHUR = "results/dynamics/{model}/step{step}.schur.tsv"
_BOTTLENECK = "results/dynamics/{model}/bottleneck.tsv"
_COUPLING = "results/topology/{model}/step{step}.coupling.tsv"
_SUMMARY = "results/topology/{model}/step{step}.summary.tsv"
_ACTIVATIONS = "results/dynamics/{model}/step{step}.activations.npz"
#: Why the cumulative quantities are no sample of independent units: each start layer's product
#: J_{l->L} contains the next one's.
_NESTED = ("the composed Jacobian from start layer l contains the one from l + 1, so its start layers are nested, "
           "not independent units; a claim on the composed stack reads dynamics/bottleneck, whose disjoint sample "
           "folds are independent")

#: The columns each reader hands over (``model`` is added by :func:`~crosslayer.claims.readers.read_tables`).
SPECTRA_COLUMNS = ("step", "layer", "depth", "readout", "regime", "spectral_radius", "frac_expanding", "frac_complex",
                   "henrici", "self_alignment", "forward_alignment", "self_alignment_res", "forward_alignment_res",
                   "residual_norm_ratio", "cumulative_effective_rank")
BASELINE_COLUMNS = ("step", "baseline_mean", "baseline_sd")
REGIMES_COLUMNS = ("step", "regime", "n_layers", "spectral_radius", "frac_expanding", "frac_complex", "henrici",
                   "self_alignment", "residual_norm_ratio", "cumulative_effective_rank", "min_self_alignment_layer",
                   "min_self_alignment")
SCHUR_COLUMNS = ("step", "mode", "construction", "draw", "alpha", "start_layer", "effective_rank", "log_frobenius")
CONTROLS_COLUMNS = ("step", "mode", "construction", "draw", "alpha", "start_layer", "effective_rank", "trained_rank",
                    "excess")
BOTTLENECK_COLUMNS = ("step", "fold", "alpha", "start_layer", "composition", "effective_rank")
COUPLING_COLUMNS = ("step", "method", "layer", "depth", "variance_captured", "null_mean", "null_sd", "excess", "t",
                    "p_mesoscale", "top_singular", "n_communities", "cohens_d", "p_boundary", "n_tail", "significant",
                    "q_boundary", "self_alignment", "disruption", "delta_top_singular", "delta_variance", "n_samples",
                    "n_units")
SUMMARY_COLUMNS = ("step", "method", "n_layers", "n_significant", "frac_significant", "median_abs_d", "median_d",
                   "median_excess", "frac_mesoscale", "rho_alignment_d", "p_alignment_d", "rho_rate_top_singular",
                   "p_rate_top_singular", "rho_rate_variance", "p_rate_variance")


def _per_step(pattern, columns):
    """A reader of one tab-separated file per checkpoint, ``step`` added, cut to `columns`."""
    def read(root, model, steps):
        frames = [pd.read_csv(root / pattern.format(model=model, step=step), sep="\t").assign(step=step)
                  for step in steps]
        if not frames:
            return pd.DataFrame(columns=list(columns))
        return pd.concat(frames, ignore_index=True)[list(columns)]
    return read


def _spectra(root, model, steps):
    """The per-layer spectra of every checkpoint, with ``depth``: the layer index again, as a
    trend's ``x`` (the engine indexes the units by ``layer``, so a trend cannot read it as ``x``),
    and ``readout``: true on the last boundary's row (layer L - 2, into the last block), whose
    forward-alignment spike the paper sets apart as "the readout boundary"."""
    table = _per_step(_SPECTRA, [c for c in SPECTRA_COLUMNS if c not in ("depth", "readout")])(root, model, steps)
    table.insert(2, "depth", table["layer"])
    last = table.groupby("step")["layer"].transform("max")
    table.insert(3, "readout", table["layer"] == last - 1)
    return table


def _controls(root, model, steps):
    """The Schur surgery's random controls (construction control_a / control_b), each draw beside the
    trained stack's rank at the same checkpoint, mode, dose and start layer (``trained_rank``, the
    dose rows) and ``excess``, the draw's rank above it. The draws are independent, seeded; the
    trained rank is the one value they are compared with."""
    table = _per_step(_SCHUR, SCHUR_COLUMNS)(root, model, steps)
    keys = ["step", "mode", "alpha", "start_layer"]
    trained = (table[table["construction"] == "dose"][[*keys, "effective_rank"]]
               .rename(columns={"effective_rank": "trained_rank"}))
    controls = table[table["construction"] != "dose"].merge(trained, on=keys, how="left")
    return controls.assign(excess=controls["effective_rank"] - controls["trained_rank"])[list(CONTROLS_COLUMNS)]


def _baseline(root, model, steps):
    """The random-subspace baseline of the alignments (one row per checkpoint: the spectra file's
    ``baseline_mean`` and ``baseline_sd``, equal on every layer row), and ``baseline_high``, their
    sum: the most a claim of "no more than chance" lets a mean reach."""
    table = _per_step(_SPECTRA, BASELINE_COLUMNS)(root, model, steps)
    table = table.drop_duplicates().reset_index(drop=True)
    return table.assign(baseline_high=table["baseline_mean"] + table["baseline_sd"])


def _per_model(pattern, columns):
    """A reader of one tab-separated file per model (every checkpoint in it), its rows at `steps`."""
    def read(root, model, steps):
        table = pd.read_csv(root / pattern.format(model=model), sep="\t")
        return table[table["step"].isin(list(steps))].reset_index(drop=True)[list(columns)]
    return read


def _samples_and_units(path):
    """(samples, units) of the activations a checkpoint's correlation graphs come from, read from the
    npz member's header alone (``acts``: samples x snapshots x units)."""
    with zipfile.ZipFile(path) as archive, archive.open("acts.npy") as member:
        major, _ = np.lib.format.read_magic(member)
        read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape = read(member)[0]
    return shape[0], shape[-1]


def _coupling(root, model, steps):
    """The per-layer topology statistics of every checkpoint, with ``depth`` (the snapshot index
    again, as in the spectra table) and the samples and units its graphs were built from
    (``n_samples``, ``n_units``)."""
    table = _per_step(_COUPLING, [c for c in COUPLING_COLUMNS[:-2] if c != "depth"])(root, model, steps)
    table["depth"] = table["layer"]  # the snapshot index again, as a trend's x
    sizes = {step: _samples_and_units(root / _ACTIVATIONS.format(model=model, step=step)) for step in steps}
    table["n_samples"] = table["step"].map(lambda step: sizes[step][0])
    table["n_units"] = table["step"].map(lambda step: sizes[step][1])
    return table[list(COUPLING_COLUMNS)]


def _graph_power(rows):
    """The correlation-graph stage's own warning (crosslayer.stats.graphs): fewer samples than units."""
    if not {"n_samples", "n_units"} <= set(rows.columns):
        return ""
    few = rows[rows["n_samples"] < rows["n_units"]]
    if few.empty:
        return ""
    n, d = int(few["n_samples"].min()), int(few["n_units"].max())
    return (f"the topology stage's correlation graphs rest on {n} samples of {d} units (fewer samples than units, "
            "as its log warns: correlations of rank < d, noisier communities and tests)")


READERS = (
    Reader("dynamics/spectra", "dynamics", (_SPECTRA,), _spectra, units=("layer",),
           nested=(("cumulative_effective_rank", _NESTED),),
           shares=(("forward_alignment", "forward_alignment_res"), BOUNDARIES)),
    Reader("dynamics/baseline", "dynamics", (_SPECTRA,), _baseline),
    Reader("dynamics/regimes", "dynamics", (_REGIMES,), _per_model(_REGIMES, REGIMES_COLUMNS)),
    Reader("dynamics/schur", "dynamics", (_SCHUR,), _per_step(_SCHUR, SCHUR_COLUMNS), units=("start_layer",),
           nested=(("effective_rank", _NESTED), ("log_frobenius", _NESTED))),
    Reader("dynamics/controls", "dynamics", (_SCHUR,), _controls, units=("draw",)),
    # disjoint sample folds: independent replicates of the composed stack (dynamics.folds)
    Reader("dynamics/bottleneck", "dynamics", (_BOTTLENECK,), _per_model(_BOTTLENECK, BOTTLENECK_COLUMNS),
           units=("fold",), empty="dynamics.folds is 0: the run kept no sample folds (set it to 4, the default)"),
    Reader("topology/coupling", "topology", (_COUPLING, _ACTIVATIONS), _coupling, units=("layer",), power=_graph_power),
    Reader("topology/summary", "topology", (_SUMMARY,), _per_step(_SUMMARY, SUMMARY_COLUMNS)),
)
