"""Tables of the coupling stage (paper 002): per checkpoint, over training, across models (numpy,
pandas and statsmodels only: no torch in the table and figure jobs).

Coupling is the negative mis-coupling. A prompt's *mean depth-wise coupling* is the mean of
``-M[l, l']`` over the ``L (L - 1)`` ordered layer pairs ``l != l'`` (the diagonal is 0 by
construction). Trajectory statistics are per token: the line-shape score and expodistance of
each token's trajectory, summarized by median and inter-quartile range as in the paper's Fig. 5.
"""

import numpy as np
import pandas as pd

__all__ = ["across_models", "checkpoint_prompts", "fit_table", "layer_profile", "load_checkpoint", "summarize_steps"]

TOKEN_WISE = ("self", "fixed_input", "fixed_output")


def load_checkpoint(path):
    """The arrays of one checkpoint's ``.coupling.npz`` as a dict (strings as Python lists)."""
    with np.load(path) as data:
        out = {key: data[key] for key in data.files}
    for key in ("prompt_ids", "variants", "metrics"):
        out[key] = [str(v) for v in out[key]]
    return out


def _off_diagonal_mean(M):
    """Mean over ``l != l'`` of (..., L, L)."""
    L = M.shape[-1]
    return (np.nansum(M, axis=(-2, -1)) - np.nansum(np.diagonal(M, axis1=-2, axis2=-1), axis=-1)) / (L * (L - 1))


def checkpoint_prompts(data, *, metric):
    """One row per prompt: id, variant, tokens, mean depth-wise coupling at every K (chosen
    metric), median line-shape score and expodistance of its tokens."""
    m = data["metrics"].index(metric)
    coupling = -_off_diagonal_mean(data["depthwise"][:, m].astype(np.float64))  # (P, n_K)
    table = pd.DataFrame({"prompt": data["prompt_ids"], "variant": data["variants"], "n_tokens": data["n_tokens"]})
    for j, K in enumerate(data["Ks"]):
        table[f"coupling_K{K}"] = coupling[:, j]
    by_prompt = pd.DataFrame({"p": data["token_prompt"], "lss": data["lss"], "ed": data["ed"]}).groupby("p")
    table["lss_median"] = by_prompt["lss"].median().to_numpy()
    table["ed_median"] = by_prompt["ed"].median().to_numpy()
    return table


def summarize_steps(checkpoints, steps, *, metric):
    """Tables over training of one model.

    Parameters
    ----------
    checkpoints : sequence of dict
        :func:`load_checkpoint` of each step, in the order of `steps`.
    steps : sequence of int
    metric : str

    Returns
    -------
    dict of DataFrame
        ``steps`` (step, variant, K: coupling mean / sd over prompts, LSS and ED median and
        quartiles over tokens); ``depthwise`` (step, K, layer, other: mean and sd over prompts of
        the coupling of ``J^layer`` on the basis of ``other``); ``profile`` (step, K, layer: Fig. 15);
        ``regularity`` (step, depth: norm, windowed LSS and ED, median over tokens);
        ``tokenwise`` (step, pair, kind, K: mean coupling over off-diagonal token pairs).
    """
    rows = {name: [] for name in ("steps", "depthwise", "profile", "regularity", "tokenwise")}
    for step, data in zip(steps, checkpoints):
        m = data["metrics"].index(metric)
        M = -data["depthwise"][:, m].astype(np.float64)  # (P, n_K, L, L) coupling
        prompts = checkpoint_prompts(data, metric=metric)
        variants = np.array(data["variants"])
        token_variant = variants[data["token_prompt"]]
        for variant in sorted(set(data["variants"])):
            tokens = token_variant == variant
            lss, ed = data["lss"][tokens], data["ed"][tokens]
            for K in data["Ks"]:
                values = prompts.loc[prompts.variant == variant, f"coupling_K{K}"]
                rows["steps"].append({
                    "step": step, "variant": variant, "K": int(K), "n_prompts": len(values),
                    "coupling_mean": values.mean(), "coupling_sd": values.std(ddof=1),
                    "lss_median": np.nanmedian(lss), "lss_q1": np.nanquantile(lss, 0.25),
                    "lss_q3": np.nanquantile(lss, 0.75), "ed_median": np.nanmedian(ed),
                    "ed_q1": np.nanquantile(ed, 0.25), "ed_q3": np.nanquantile(ed, 0.75)})
        L = M.shape[-1]
        for j, K in enumerate(data["Ks"]):
            mean, sd = M[:, j].mean(axis=0), M[:, j].std(axis=0, ddof=1) if len(M) > 1 else np.full((L, L), np.nan)
            profile = layer_profile(M[:, j]).mean(axis=0)
            for layer in range(L):
                rows["profile"].append({"step": step, "K": int(K), "layer": layer, "coupling": profile[layer]})
                for other in range(L):
                    rows["depthwise"].append({"step": step, "K": int(K), "layer": layer, "other": other,
                                              "coupling_mean": mean[layer, other], "coupling_sd": sd[layer, other]})
        for depth in range(data["norms"].shape[0]):
            rows["regularity"].append({
                "step": step, "depth": depth, "norm_median": np.median(data["norms"][depth]),
                "lss_windowed_median": _nanmedian(data["lss_windowed"][depth]),
                "ed_windowed_median": _nanmedian(data["ed_windowed"][depth])})
        for p, (l, lp) in enumerate(data.get("layer_pairs", np.zeros((0, 2), int))):
            for kind in TOKEN_WISE:
                values = -data[f"tw_{kind}"][p][:, m].astype(np.float64)  # (P_tw, n_K, ..., T, T)
                T = values.shape[-1]
                off = ~np.eye(T, dtype=bool)
                for j, K in enumerate(data["Ks"]):
                    rows["tokenwise"].append({"step": step, "layer": int(l), "other": int(lp), "kind": kind,
                                              "K": int(K), "coupling_mean": np.nanmean(values[:, j][..., off])})
    return {name: pd.DataFrame(table) for name, table in rows.items()}


def layer_profile(M):
    """How much each layer is coupled with all the others (paper Fig. 15): for each ``l`` the mean
    of ``M[l, l']`` and ``M[l', l]`` over ``l' != l``.

    Parameters
    ----------
    M : (..., L, L) array_like

    Returns
    -------
    (..., L) ndarray
    """
    M = np.asarray(M, dtype=np.float64)
    L = M.shape[-1]
    if L < 2:
        raise ValueError(f"need at least 2 layers, got {L}")
    both = M + np.swapaxes(M, -1, -2)
    diagonal = np.diagonal(both, axis1=-2, axis2=-1)
    return (both.sum(axis=-1) - diagonal) / (2 * (L - 1))


def _nanmedian(x):
    return np.nanmedian(x) if np.isfinite(x).any() else np.nan


def across_models(final, *, scores=None):
    """One row per model: its last checkpoint's mean coupling at each K, size, and score.

    Parameters
    ----------
    final : dict
        model -> (steps table of :func:`summarize_steps`, checkpoint dict of the last step).
    scores : dict, optional
        model -> benchmark score.
    """
    rows = []
    for model, (steps, data) in final.items():
        last = steps[(steps.step == steps.step.max()) & (steps.variant == "plain")]
        row = {"model": model, "step": int(steps.step.max()), "n_params": int(data["n_params"]),
               "n_layers": int(data["n_layers"]), "d_model": int(data["d_model"])}
        row.update({f"coupling_K{int(r.K)}": r.coupling_mean for r in last.itertuples()})
        row["score"] = scores[model] if scores else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def fit_table(models):
    """OLS fits across models (statsmodels): score against coupling (linear, and exponential as
    ``log score`` against coupling), parameter count (log10), depth and width; coupling against
    the same sizes. Rows with fewer than 3 models or no score have NaN statistics.

    Returns
    -------
    DataFrame
        y, x, K, n, slope, intercept, r2, p (of the slope).
    """
    import statsmodels.api as sm

    predictors = {"log10_params": np.log10(models.n_params.astype(float)), "n_layers": models.n_layers.astype(float),
                  "d_model": models.d_model.astype(float)}
    Ks = [int(c.removeprefix("coupling_K")) for c in models.columns if c.startswith("coupling_K")]
    score = models.score.astype(float)
    pairs = []
    for K in Ks:
        coupling = models[f"coupling_K{K}"].astype(float)
        pairs += [("score", score, "coupling", coupling, K), ("log_score", np.log(score), "coupling", coupling, K)]
        pairs += [("coupling", coupling, name, x, K) for name, x in predictors.items()]
    pairs += [("score", score, name, x, None) for name, x in predictors.items()]
    rows = []
    for y_name, y, x_name, x, K in pairs:
        ok = np.isfinite(y) & np.isfinite(x)
        row = {"y": y_name, "x": x_name, "K": K, "n": int(ok.sum()), "slope": np.nan, "intercept": np.nan,
               "r2": np.nan, "p": np.nan}
        if ok.sum() >= 3 and np.ptp(x[ok]) > 0:
            fit = sm.OLS(y[ok].to_numpy(), sm.add_constant(x[ok].to_numpy())).fit()
            row.update(slope=fit.params[1], intercept=fit.params[0], r2=fit.rsquared, p=fit.pvalues[1])
        rows.append(row)
    return pd.DataFrame(rows).astype({"K": "Int64"})  # blank where the fit has no K
