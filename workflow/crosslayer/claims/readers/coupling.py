"""Paper 002's tables: what the coupling stage writes per model (``summarize_coupling``: prompts.tsv,
steps.tsv, depthwise.tsv), from each checkpoint's ``.coupling.npz`` the token-wise coupling (self,
and with a fixed input or output token) in long form and each block's top singular value, the table
over all models (``coupling_across_models``: models.tsv, also with each predictor of the score as a
row), coupling beside each checkpoint's held-out loss (the evaluation stage's heldout.tsv), and the
embedding_noise stage's per-prompt cosines of each checkpoint (Fig. 32).

Coupling is the negative mis-coupling in every table, as the stage writes it; the TSVs hold the
configured ``coupling.metric`` and ``coupling.final_norm`` convention, the npz every metric (a
``metric`` column). Nothing is recomputed: the readers reshape (one row per K instead of a column per
K) and select (the trivial diagonals out, one model's row of models.tsv); the fixed-token coupling
is averaged over the other token's pairs, which the claims would average within each prompt anyway.
"""

import warnings

import numpy as np
import pandas as pd

from crosslayer.claims.readers.base import PAIRS, Reader
from crosslayer.evaluation.tables import coupling_and_loss
from crosslayer.npz import open_npz

_TSV = "results/coupling/{model}/{name}.tsv"
_NPZ = "results/coupling/{model}/step{step}.coupling.npz"
_MODELS = "results/coupling/models.tsv"
_HELDOUT = "results/evaluation/{model}/heldout.tsv"
_NOISE = "results/embedding_noise/{model}/step{step}.tsv"
_TRAJECTORY = ("lss_median", "ed_median", "lss_raw_median", "ed_raw_median")


def _tsv(root, model, name):
    return pd.read_csv(root / _TSV.format(model=model, name=name), sep="\t")


def _per_k(table, keys):
    """The ``coupling_K<K>`` columns of `table` as rows: `keys`, ``K``, ``coupling``."""
    wide = [c for c in table.columns if c.startswith("coupling_K")]
    long = table[[*keys, *wide]].melt(id_vars=list(keys), value_vars=wide, var_name="K", value_name="coupling")
    long["K"] = long["K"].str.removeprefix("coupling_K").astype(int)
    return long.sort_values([*keys[:1], "K"], kind="stable").reset_index(drop=True)


def _pooled_prompts(root, model):
    """prompts.tsv's rows of the pooled set (source ``all``): a source with ``pooled: false`` (the
    coupling suite's WikiText-2 prompts of Fig. 26) is not the set the claims are about."""
    table = _tsv(root, model, "prompts")
    return table[table.pooled].reset_index(drop=True) if "pooled" in table else table


def _prompts(root, model, steps):
    """Per checkpoint and pooled prompt, the mean depth-wise coupling at each K (prompts.tsv, one row
    per K)."""
    return _per_k(_pooled_prompts(root, model), ["step", "prompt", "source", "variant", "n_tokens"])


def _prompt_trajectories(root, model, steps):
    """Per checkpoint and pooled prompt, the median line-shape score and expodistance of its tokens,
    x^L after the final norm (unsuffixed, the paper's eq. 7) and before it (``_raw``) (prompts.tsv)."""
    return _pooled_prompts(root, model)[["step", "prompt", "source", "variant", "n_tokens", *_TRAJECTORY]]


def _steps(root, model, steps):
    """steps.tsv as written: per checkpoint, prompt source, variant and K."""
    return _tsv(root, model, "steps")


def _depthwise(root, model, steps):
    """depthwise.tsv without its diagonal (``J^l`` on its own basis: mis-coupling 0 by construction),
    with ``pair`` (``"l-l'"``, ordered), ``layers`` (``"a-b"``, a < b: both orders of a pair, one
    independent unit) and ``distance`` ``|l - l'|`` to name and place each layer pair."""
    table = _tsv(root, model, "depthwise")
    table = table[table.layer != table.other].reset_index(drop=True)
    table.insert(3, "pair", [f"{a}-{b}" for a, b in zip(table.layer, table.other)])
    table.insert(4, "layers", [f"{min(a, b)}-{max(a, b)}" for a, b in zip(table.layer, table.other)])
    table.insert(7, "distance", (table.layer - table.other).abs())
    return table[["step", "variant", "K", "layer", "other", "pair", "layers", "distance", "coupling_mean",
                  "coupling_sd"]]


def _tokenwise_self(root, model, steps):
    """Token-wise self coupling (``J^l_tt`` on the singular vectors of ``J^l'_t't'``) of every
    configured layer pair, token-wise prompt, metric and K, one row per token pair ``t != t'``
    (``t = t'`` is the depth-wise coupling of one token, trivial for ``l = l'``); ``cell`` names the
    layer pair, prompt and token pair, ``same_layer`` marks the pairs ``l = l'`` (the paper's
    token-wise coupling at one depth, kept apart from pairs across depth). Coupling = - the npz's ``tw_self``; only the token-wise arrays
    are read from the file."""
    frames = []
    for step in steps:
        with open_npz(root / _NPZ.format(model=model, step=step)) as z:
            pairs = z["layer_pairs"].reshape(-1, 2) if "layer_pairs" in z.files else np.zeros((0, 2), int)
            if not len(pairs) or "tw_self" not in z.files:
                continue
            values = z["tw_self"].astype(np.float64)  # (n_pairs, P_tw, n_metrics, n_K, T, T)
            metrics, Ks, prompt_ids = z["metrics"].astype(str), z["Ks"].astype(int), z["prompt_ids"].astype(str)
        n_pairs, n_prompts, _, _, T, _ = values.shape
        index = np.indices(values.shape).reshape(values.ndim, -1)
        keep = index[4] != index[5]
        q, p, m, k, t, u = index[:, keep]
        prompts = np.array(prompt_ids[:n_prompts].tolist(), dtype=object)
        cells = np.empty((n_pairs, n_prompts, T, T), dtype=object)  # one string per cell, shared by its rows
        for (a, b, c, d), _ in np.ndenumerate(cells):
            cells[a, b, c, d] = f"{pairs[a, 0]}-{pairs[a, 1]}:{prompts[b]}:{c}-{d}"
        frames.append(pd.DataFrame({
            "step": step, "metric": np.array(metrics.tolist(), dtype=object)[m], "K": Ks[k],
            "layer": pairs[q, 0], "other": pairs[q, 1], "same_layer": pairs[q, 0] == pairs[q, 1],
            "prompt": prompts[p], "token": t, "token_other": u, "cell": cells[q, p, t, u],
            "coupling": -values.reshape(-1)[keep]}))
    columns = ["step", "metric", "K", "layer", "other", "same_layer", "prompt", "token", "token_other", "cell",
               "coupling"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


#: The token-wise contexts with one token held fixed (the npz's ``tw_<context>`` arrays).
FIXED = ("fixed_input", "fixed_output")


def _tokenwise_fixed(root, model, steps):
    """Token-wise coupling with one token held fixed (the npz's ``tw_fixed_input`` ``[t1, t2, t2']``:
    input token t1 fixed, ``J^l_{t1 t2}`` on the singular vectors of ``J^l'_{t1 t2'}``; and
    ``tw_fixed_output`` ``[t2, t1, t1']``): per step, metric, K, layer pair, prompt, context and
    fixed token, the mean coupling over the pairs of the other token that differ and exist (a pair
    with itself is the depth-wise coupling of one token; the claims average a prompt's rows anyway,
    and the full table would be T times larger). Coupling = - the npz's value."""
    frames = []
    for step in steps:
        with open_npz(root / _NPZ.format(model=model, step=step)) as z:
            if "layer_pairs" not in z.files or "tw_fixed_input" not in z.files:
                continue
            pairs = z["layer_pairs"].reshape(-1, 2)
            arrays = {name: z[f"tw_{name}"].astype(np.float64) for name in FIXED}
            metrics, Ks, prompt_ids = z["metrics"].astype(str), z["Ks"].astype(int), z["prompt_ids"].astype(str)
        for context, values in arrays.items():  # (n_pairs, P_tw, n_metrics, n_K, T, T, T)
            T = values.shape[-1]
            values = np.where(np.eye(T, dtype=bool), np.nan, values)  # the other token paired with itself out
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a fixed token with no pair: NaN, dropped
                means = np.nanmean(values, axis=(-2, -1))  # (n_pairs, P_tw, n_metrics, n_K, T)
            q, p, m, k, f = np.indices(means.shape).reshape(means.ndim, -1)
            frames.append(pd.DataFrame({
                "step": step, "metric": metrics[m], "K": Ks[k], "layer": pairs[q, 0], "other": pairs[q, 1],
                "same_layer": pairs[q, 0] == pairs[q, 1], "prompt": prompt_ids[p], "context": context,
                "fixed": f, "coupling": -means.reshape(-1)}).dropna(subset=["coupling"]))
    columns = ["step", "metric", "K", "layer", "other", "same_layer", "prompt", "context", "fixed", "coupling"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def _across_models(root, model, steps):
    """The model's row of models.tsv (its last checkpoint), one row per K. ``score`` only where the
    run has scores (``coupling.scores`` or the benchmarks stage): without them the column is left out, so that a claim on it
    names the missing column rather than finding no value."""
    table = pd.read_csv(root / _MODELS, sep="\t")
    row = table[table.model == model]
    keys = ["step", "n_params", "n_layers", "d_model", "training_tokens", "score"]
    long = _per_k(row, ["model", *keys]).drop(columns="model")
    return long.drop(columns="score") if long["score"].isna().all() else long


#: The model sizes the paper compares coupling with as predictors of the score (Figure 35), as
#: fits.tsv takes them (crosslayer.coupling.tables.fit_table, kept apart: that module needs
#: statsmodels, which the claims job does not): parameters on a log10 scale, depth, width.
SIZES = {"log10_params": lambda row: np.log10(row["n_params"]), "n_layers": lambda row: row["n_layers"],
         "d_model": lambda row: row["d_model"]}


def _predictors(root, model, steps):
    """The model's row of models.tsv with each predictor of its score as a row (``predictor``,
    ``x``): its coupling at each K, and its size (:data:`SIZES`, repeated at each K so that a claim
    selects K once). Without scores there is no ``score`` column: a claim on it names it."""
    row = _across_models(root, model, steps)
    frames = [row.assign(predictor="coupling", x=row["coupling"])]
    frames += [row.assign(predictor=name, x=float(size(row.iloc[0]))) for name, size in SIZES.items() if len(row)]
    columns = ["step", "K", "predictor", "x", *(["score"] if "score" in row else [])]
    return pd.concat(frames, ignore_index=True)[columns]


def _singular_values(root, model, steps):
    """Per checkpoint, prompt and block, the top singular value of the block's residual Jacobian
    (the npz's ``singular_values[prompt, layer, 0]``, the plain and CoT prompts alike), with the
    model's number of layers (a trend's ``x`` across models)."""
    frames = []
    for step in steps:
        with open_npz(root / _NPZ.format(model=model, step=step)) as z:
            top = z["singular_values"][..., 0].astype(np.float64)  # (P, L)
            prompts, n_layers = z["prompt_ids"].astype(str), int(z["n_layers"])
        p, layer = np.indices(top.shape).reshape(2, -1)
        frames.append(pd.DataFrame({"step": step, "prompt": prompts[p], "layer": layer, "n_layers": n_layers,
                                    "sigma_1": top.reshape(-1)}))
    columns = ["step", "prompt", "layer", "n_layers", "sigma_1"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def _over_training(root, model, steps):
    """Per checkpoint and K, the mean coupling over plain prompts (steps.tsv, source ``all``) beside
    the checkpoint's held-out loss and bits per byte (the evaluation stage's heldout.tsv)."""
    heldout = pd.read_csv(root / _HELDOUT.format(model=model), sep="\t")
    return coupling_and_loss(_tsv(root, model, "steps"), heldout)


def _noise_prompts(root, model, steps):
    """Per checkpoint, prompt, noise level and depth, the cosine of noisy and clean states (the
    embedding_noise job's table, a step column added)."""
    tables = [pd.read_csv(root / _NOISE.format(model=model, step=step), sep="\t") for step in steps]
    return pd.concat([table.assign(step=step) for step, table in zip(steps, tables)], ignore_index=True)[
        ["step", *tables[0].columns]]


READERS = (
    Reader("coupling/prompts", "coupling", (_TSV.replace("{name}", "prompts"),), _prompts, units=("prompt",)),
    Reader("coupling/prompt_trajectories", "coupling", (_TSV.replace("{name}", "prompts"),), _prompt_trajectories,
           units=("prompt",)),
    Reader("coupling/steps", "coupling", (_TSV.replace("{name}", "steps"),), _steps, units=("step",), series=True),
    # the two orders of a layer pair are one unit (`layers`), not two (`pair`)
    Reader("coupling/depthwise", "coupling", (_TSV.replace("{name}", "depthwise"),), _depthwise, units=("layers",),
           shares=((), PAIRS)),
    # a prompt's token pairs (`cell`) are not independent of each other: the prompt is the unit
    Reader("coupling/tokenwise_self", "coupling", (_NPZ,), _tokenwise_self, units=("prompt",)),
    # a prompt's fixed tokens are not independent of each other either
    Reader("coupling/tokenwise_fixed", "coupling", (_NPZ,), _tokenwise_fixed, units=("prompt",)),
    Reader("coupling/across_models", "coupling", (_MODELS,), _across_models, units=("model",)),
    Reader("coupling/predictors", "coupling", (_MODELS,), _predictors, units=("model",)),
    Reader("coupling/singular_values", "coupling", (_NPZ,), _singular_values, units=("prompt",)),
    Reader("coupling/over_training", "coupling", (_TSV.replace("{name}", "steps"), _HELDOUT), _over_training,
           also=("evaluation",), units=("step",), series=True),
    Reader("embedding_noise/prompts", "embedding_noise", (_NOISE,), _noise_prompts, units=("prompt",)),
)
