"""Tables of the coupling stage (paper 002): per checkpoint, over training, across models (numpy,
pandas and statsmodels only: no torch in the table and figure jobs).

Coupling is the negative mis-coupling. A prompt's *mean depth-wise coupling* is the mean of
``-M[l, l']`` over the ``L (L - 1)`` ordered layer pairs ``l != l'`` (the diagonal is 0 by
construction). Trajectory statistics are per token: the line-shape score and expodistance of
each token's trajectory, summarized by median and inter-quartile range as in the paper's Fig. 5,
in both conventions for the last state: after the final norm (the paper's; unsuffixed columns)
and before it (``_raw`` columns).
"""

import numpy as np
import pandas as pd

from crosslayer.coupling.regularity import (unpack_symmetric, windowed_equidistance, windowed_expodistance,
                                            windowed_line_shape)
from crosslayer.evaluation.tables import coupling_and_loss
from crosslayer.npz import load_npz

__all__ = ["NOISE_COLUMNS", "NOISE_PROMPT_COLUMNS", "across_models", "checkpoint_prompts", "fit_table", "layer_profile",
           "load_checkpoint", "noise_summary", "prompt_groups", "regularity_across_models", "subset_fits",
           "summarize_steps", "training_fits", "windowed_regularity"]

TOKEN_WISE = ("self", "fixed_input", "fixed_output")
TRAJECTORY = ("lss", "ed", "lss_raw", "ed_raw")  # per-token statistics, x^L after / before the final norm


def load_checkpoint(path):
    """The arrays of one checkpoint's ``.coupling.npz`` as a dict (strings as Python lists)."""
    out = load_npz(path)
    for key, what in (("sources", "per-source coupling tables"),  # else every source silently pooled
                      ("step_gram", "windowed statistics of any width")):
        if key not in out:
            raise ValueError(f"{path} predates {what}; re-run it: snakemake -R block_coupling")
    for key in ("prompt_ids", "variants", "sources", "metrics"):
        out[key] = [str(v) for v in out[key]]
    return out


def _off_diagonal_mean(M):
    """Mean over ``l != l'`` of (..., L, L)."""
    L = M.shape[-1]
    return (np.nansum(M, axis=(-2, -1)) - np.nansum(np.diagonal(M, axis1=-2, axis2=-1), axis=-1)) / (L * (L - 1))


def checkpoint_prompts(data, *, metric, unpooled=()):
    """One row per prompt: id, source, variant, pooled (in source ``all``: :func:`prompt_groups`),
    tokens, mean depth-wise coupling at every K (chosen metric), median line-shape score and
    expodistance of its tokens (both conventions)."""
    m = data["metrics"].index(metric)
    coupling = -_off_diagonal_mean(data["depthwise"][:, m].astype(np.float64))  # (P, n_K)
    table = pd.DataFrame({"prompt": data["prompt_ids"], "source": data["sources"], "variant": data["variants"],
                          "pooled": ~np.isin(data["sources"], list(unpooled)), "n_tokens": data["n_tokens"]})
    for j, K in enumerate(data["Ks"]):
        table[f"coupling_K{K}"] = coupling[:, j]
    by_prompt = pd.DataFrame({"p": data["token_prompt"], **{name: data[name] for name in TRAJECTORY}}).groupby("p")
    for name in TRAJECTORY:
        table[f"{name}_median"] = by_prompt[name].median().to_numpy()
    return table


def prompt_groups(data, unpooled=()):
    """``{(source, variant): prompt mask}``: every variant over all sources but the `unpooled` ones
    (source ``all``) and every source's own variants. Plain and chain-of-thought prompts are never
    pooled; an unpooled source (a dataset's ``pooled: false``, e.g. the WikiText-2 prompts of Fig.
    26) is measured for its own tables only."""
    sources, variants = np.array(data["sources"]), np.array(data["variants"])
    pooled = ~np.isin(sources, list(unpooled))
    groups = {("all", v): pooled & (variants == v) for v in sorted(set(variants[pooled]))}
    groups.update({(s, v): (sources == s) & (variants == v) for s in dict.fromkeys(sources)
                   for v in sorted(set(variants[sources == s]))})
    return groups


def windowed_regularity(data, *, width):
    """Windowed line-shape score and expodistance of every token, both conventions for ``x^L``.

    Parameters
    ----------
    data : dict
        :func:`load_checkpoint`: ``step_gram``, ``norms`` and ``norm_last_raw``.
    width : int
        Odd window width (``coupling.window``).

    Returns
    -------
    dict of (L + 1, N) ndarray
        ``lss_windowed``, ``ed_windowed``, ``eq_windowed`` (x^L after the final norm),
        ``lss_windowed_raw``, ``ed_windowed_raw``, ``eq_windowed_raw`` (before it); NaN where the
        window does not fit, and the equidistance NaN for a file without ``step_lengths`` (written
        before 2026-11-26).
    """
    L = data["norms"].shape[0] - 1
    raw_steps = [*range(L - 1), L]  # the shared steps, then the one to the raw x^L
    lengths = data.get("step_lengths", np.full((L + 1, data["norms"].shape[1]), np.nan))
    out = {"ed_windowed": windowed_expodistance(data["norms"], width=width),
           "ed_windowed_raw": windowed_expodistance(_raw_norms(data), width=width),
           "eq_windowed": windowed_equidistance(lengths[:L], width=width),
           "eq_windowed_raw": windowed_equidistance(lengths[raw_steps], width=width),
           "lss_windowed": np.empty_like(data["norms"], dtype=np.float64),
           "lss_windowed_raw": np.empty_like(data["norms"], dtype=np.float64)}
    for start in range(0, data["step_gram"].shape[0], 4096):  # (4096, L + 1, L + 1) float64 at a time
        chunk = slice(start, start + 4096)
        gram = unpack_symmetric(data["step_gram"][chunk])
        out["lss_windowed"][:, chunk] = windowed_line_shape(gram[:, :L, :L], width=width)
        out["lss_windowed_raw"][:, chunk] = windowed_line_shape(gram[:, raw_steps][:, :, raw_steps], width=width)
    return out


def summarize_steps(checkpoints, steps, *, metric, window, unpooled=()):
    """Tables over training of one model, each prompt group apart (:func:`prompt_groups`).

    Parameters
    ----------
    checkpoints : sequence of dict
        :func:`load_checkpoint` of each step, in the order of `steps`.
    steps : sequence of int
    metric : str
    window : int
        Width of the windowed statistics (:func:`windowed_regularity`).
    unpooled : sequence of str
        Sources left out of source ``all`` (:func:`prompt_groups`).

    Returns
    -------
    dict of DataFrame
        ``prompts`` (step and :func:`checkpoint_prompts`); ``steps`` (step, source, variant, K:
        coupling mean / sd over prompts, LSS and ED median
        and quartiles over tokens, ``_raw`` with x^L before the final norm); ``depthwise`` (step,
        variant, K, layer, other: mean and sd over prompts of the coupling of ``J^layer`` on the
        basis of ``other``); ``profile`` (step, source, variant, K, layer: Fig. 15); ``regularity``
        (step, source, variant, depth: norm, windowed LSS, ED and equidistance, median over tokens, both conventions;
        logit-lens entropy); ``tokenwise`` (step, pair, kind, K: mean coupling over off-diagonal
        token pairs of the first prompts).
    """
    rows = {name: [] for name in ("steps", "depthwise", "profile", "regularity", "tokenwise")}
    per_prompt = []
    for step, data in zip(steps, checkpoints):
        m = data["metrics"].index(metric)
        M = -data["depthwise"][:, m].astype(np.float64)  # (P, n_K, L, L) coupling
        prompts = checkpoint_prompts(data, metric=metric, unpooled=unpooled)
        per_prompt.append(prompts.assign(step=step)[["step", *prompts.columns]])
        windows = windowed_regularity(data, width=window)
        for (source, variant), chosen in prompt_groups(data, unpooled).items():
            tokens = chosen[data["token_prompt"]]
            rows["steps"] += _step_rows(data, prompts[chosen], tokens, step=step, source=source, variant=variant)
            for j, K in enumerate(data["Ks"]):
                profile = layer_profile(M[chosen, j]).mean(axis=0)
                rows["profile"] += [{"step": step, "source": source, "variant": variant, "K": int(K), "layer": layer,
                                     "coupling": value} for layer, value in enumerate(profile)]
            rows["regularity"] += _regularity_rows(data, windows, tokens, step=step, source=source, variant=variant)
            if source == "all":
                rows["depthwise"] += _depthwise_rows(M[chosen], data["Ks"], step=step, variant=variant)
        rows["tokenwise"] += _tokenwise_rows(data, m, step=step)
    return {"prompts": pd.concat(per_prompt, ignore_index=True),
            **{name: pd.DataFrame(table) for name, table in rows.items()}}


def _step_rows(data, prompts, tokens, **keys):
    regularity = {}
    for name in TRAJECTORY:
        values = data[name][tokens]
        regularity.update({f"{name}_median": np.nanmedian(values), f"{name}_q1": np.nanquantile(values, 0.25),
                           f"{name}_q3": np.nanquantile(values, 0.75)})
    return [{**keys, "K": int(K), "n_prompts": len(prompts), "coupling_mean": prompts[f"coupling_K{K}"].mean(),
             "coupling_sd": prompts[f"coupling_K{K}"].std(ddof=1), **regularity} for K in data["Ks"]]


def _raw_norms(data):
    """``||x^l||`` (L + 1, N) with ``x^L`` before the final norm: only the last state differs."""
    return np.concatenate([data["norms"][:-1], data["norm_last_raw"][None]])


def _regularity_rows(data, windows, tokens, **keys):
    norms = {"": data["norms"][:, tokens], "_raw": _raw_norms(data)[:, tokens]}
    rows = []
    for depth in range(data["norms"].shape[0]):
        row = {**keys, "depth": depth, "logit_entropy_median": np.median(data["logit_entropy"][depth, tokens])}
        for suffix in ("", "_raw"):
            row.update({f"norm{suffix}_median": np.median(norms[suffix][depth]),
                        f"lss_windowed{suffix}_median": _nanmedian(windows["lss_windowed" + suffix][depth, tokens]),
                        f"ed_windowed{suffix}_median": _nanmedian(windows["ed_windowed" + suffix][depth, tokens]),
                        f"eq_windowed{suffix}_median": _nanmedian(windows["eq_windowed" + suffix][depth, tokens])})
        rows.append(row)
    return rows


def _depthwise_rows(M, Ks, **keys):
    L, rows = M.shape[-1], []
    for j, K in enumerate(Ks):
        mean, sd = M[:, j].mean(axis=0), M[:, j].std(axis=0, ddof=1) if len(M) > 1 else np.full((L, L), np.nan)
        rows += [{**keys, "K": int(K), "layer": layer, "other": other, "coupling_mean": mean[layer, other],
                  "coupling_sd": sd[layer, other]} for layer in range(L) for other in range(L)]
    return rows


def _tokenwise_rows(data, m, **keys):
    rows = []
    for p, (l, lp) in enumerate(data.get("layer_pairs", np.zeros((0, 2), int))):
        for kind in TOKEN_WISE:
            values = -data[f"tw_{kind}"][p][:, m].astype(np.float64)  # (P_tw, n_K, ..., T, T)
            off = ~np.eye(values.shape[-1], dtype=bool)
            rows += [{**keys, "layer": int(l), "other": int(lp), "kind": kind, "K": int(K),
                      "coupling_mean": np.nanmean(values[:, j][..., off])} for j, K in enumerate(data["Ks"])]
    return rows


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


def across_models(final, *, scores=None, sources=None, training_tokens=None, heldout=None):
    """One row per model: its last checkpoint's mean coupling at each K, size, training tokens,
    score (the paper's Table 1 beside its coupling) and held-out loss.

    Parameters
    ----------
    final : dict
        model -> (steps table of :func:`summarize_steps`, checkpoint dict of the last step).
    scores : dict, optional
        model -> benchmark score.
    sources : dict, optional
        model -> where its score came from (``coupling.scores`` unless given).
    training_tokens : dict, optional
        model -> tokens trained on (None: unknown).
    heldout : dict, optional
        model -> its held-out table (:func:`crosslayer.evaluation.heldout.heldout_table`); the row of
        the model's last step gives ``heldout_loss`` and ``bits_per_byte``.

    Raises
    ------
    ValueError
        A held-out table lacks the model's last step (it would pair coupling and loss of two checkpoints).
    """
    rows = []
    for model, (steps, data) in final.items():
        last = steps[(steps.step == steps.step.max()) & (steps.source == "all") & (steps.variant == "plain")]
        row = {"model": model, "step": int(steps.step.max()), "n_params": int(data["n_params"]),
               "n_layers": int(data["n_layers"]), "d_model": int(data["d_model"])}
        row.update({f"coupling_K{int(r.K)}": r.coupling_mean for r in last.itertuples()})
        row["training_tokens"] = (training_tokens or {}).get(model) or np.nan
        row["score"] = scores[model] if scores else np.nan
        row["score_source"] = (sources or {}).get(model, "coupling.scores") if scores else ""
        row["heldout_loss"] = row["bits_per_byte"] = np.nan
        if heldout is not None:
            at = heldout[model][heldout[model].step == row["step"]]
            if at.empty:
                raise ValueError(f"the held-out table of {model} has no step {row['step']}, its last coupling step")
            row["heldout_loss"], row["bits_per_byte"] = float(at.loss.iloc[0]), float(at.bits_per_byte.iloc[0])
        rows.append(row)
    return pd.DataFrame(rows)


def training_fits(steps, heldout):
    """OLS of held-out loss on mean coupling over each model's checkpoints (:func:`coupling_and_loss`),
    at every K; model ``all`` pools every model's checkpoints. Coupling against loss over
    training: the embedded default's view of paper 002's coupling-generalization link.

    Parameters
    ----------
    steps : dict
        model -> its ``steps`` table (:func:`summarize_steps`).
    heldout : dict or None
        model -> its held-out table (step, loss, bits_per_byte); None (no evaluation stage): no rows.

    Returns
    -------
    DataFrame
        model, y (``heldout_loss``), x (``coupling``), K, n, slope, intercept, r2, p; NaN statistics
        with fewer than 3 checkpoints.
    """
    columns = ["model", "y", "x", "K", "n", "slope", "intercept", "r2", "p"]
    if not heldout:
        return pd.DataFrame(columns=columns)
    points = pd.concat([coupling_and_loss(table, heldout[model]).assign(model=model)
                        for model, table in steps.items()], ignore_index=True)
    rows = []
    for model, part in [*points.groupby("model", sort=False), ("all", points)]:
        for K, at in part.groupby("K"):
            rows.append({"model": model, "y": "heldout_loss", "x": "coupling", "K": int(K),
                         **_ols(at.heldout_loss.to_numpy(float), at.coupling.to_numpy(float))})
    return pd.DataFrame(rows, columns=columns)


def _ols(y, x):
    """n, slope, intercept, R² and the slope's p of ``y ~ x`` (statsmodels) over the finite pairs;
    NaN statistics with fewer than 3 pairs or a constant x."""
    import statsmodels.api as sm

    ok = np.isfinite(y) & np.isfinite(x)
    out = {"n": int(ok.sum()), "slope": np.nan, "intercept": np.nan, "r2": np.nan, "p": np.nan}
    if ok.sum() >= 3 and np.ptp(x[ok]) > 0:
        fit = sm.OLS(y[ok], sm.add_constant(x[ok])).fit()
        out.update(slope=fit.params[1], intercept=fit.params[0], r2=fit.rsquared, p=fit.pvalues[1])
    return out


def regularity_across_models(steps, models):
    """Trajectory regularity of every model trained (its last step) and untrained (its step 0,
    where it has one: a twin or a released initialisation), sorted by size: paper Figs 5 and 25.

    Parameters
    ----------
    steps : dict
        model -> its ``steps`` table (:func:`summarize_steps`).
    models : DataFrame
        :func:`across_models` (``model``, ``n_params``).

    Returns
    -------
    DataFrame
        model, n_params, state (``untrained`` / ``trained``), step, and the LSS and ED median and
        quartiles over the tokens of plain prompts, both conventions.
    """
    columns = [f"{name}_{stat}" for name in TRAJECTORY for stat in ("median", "q1", "q3")]
    rows = []
    for model, n_params in zip(models.model, models.n_params):
        table = steps[model].query("source == 'all' and variant == 'plain'")
        table = table[table.K == table.K.min()]  # the regularity columns do not depend on K
        for state, step in (("untrained", 0), ("trained", table.step.max())):
            row = table[table.step == step]
            if len(row) and not (state == "untrained" and step == table.step.max()):
                rows.append({"model": model, "n_params": int(n_params), "state": state, "step": int(step),
                             **row.iloc[0][columns].to_dict()})
    return pd.DataFrame(rows, columns=["model", "n_params", "state", "step", *columns]).sort_values(
        ["n_params", "model", "state"], ascending=[True, True, False], kind="stable").reset_index(drop=True)


def subset_fits(models, subsets=None):
    """:func:`fit_table` over every model (subset ``all``) and over each named subset (the paper's
    Table 4), one table with a ``subset`` column first."""
    parts = [("all", models), *((name, models[models.model.isin(members)])
                                for name, members in (subsets or {}).items())]
    return pd.concat([fit_table(part).assign(subset=name) for name, part in parts], ignore_index=True)[
        ["subset", "y", "x", "K", "n", "slope", "intercept", "r2", "p"]]


def fit_table(models):
    """OLS fits across models (statsmodels): score against coupling (linear, and exponential as
    ``log score`` against coupling), parameter count (log10), depth, width and training tokens
    (log10); held-out bits per byte against coupling; coupling against the same predictors. Rows
    with fewer than 3 models or no score have NaN statistics.

    Returns
    -------
    DataFrame
        y, x, K, n, slope, intercept, r2, p (of the slope).
    """
    predictors = {"log10_params": np.log10(models.n_params.astype(float)), "n_layers": models.n_layers.astype(float),
                  "d_model": models.d_model.astype(float),
                  "log10_tokens": np.log10(models.get("training_tokens", pd.Series(np.nan, models.index))
                                           .astype(float))}
    Ks = [int(c.removeprefix("coupling_K")) for c in models.columns if c.startswith("coupling_K")]
    score = models.score.astype(float)
    bits = models.get("bits_per_byte", pd.Series(np.nan, models.index)).astype(float)
    pairs = []
    for K in Ks:
        coupling = models[f"coupling_K{K}"].astype(float)
        pairs += [("score", score, "coupling", coupling, K), ("log_score", np.log(score), "coupling", coupling, K),
                  ("bits_per_byte", bits, "coupling", coupling, K)]
        pairs += [("coupling", coupling, name, x, K) for name, x in predictors.items()]
    pairs += [("score", score, name, x, None) for name, x in predictors.items()]
    rows = [{"y": y_name, "x": x_name, "K": K, **_ols(y.to_numpy(float), x.to_numpy(float))}
            for y_name, y, x_name, x, K in pairs]
    return pd.DataFrame(rows).astype({"K": "Int64"})  # blank where the fit has no K


#: The embedding_noise job's table (:func:`crosslayer.coupling.noise.measure_noise`), one row per
#: prompt, noise level and depth: the mean cosine over the prompt's tokens and the draws, its sd, how many.
NOISE_PROMPT_COLUMNS = ["prompt", "level", "layer", "cosine", "sd", "n"]
#: A model's table over its checkpoints (:func:`noise_summary`): per step, level and depth, the mean
#: and sd over prompts.
NOISE_COLUMNS = ["step", "level", "layer", "cosine", "sd", "n_prompts"]


def noise_summary(tables):
    """A model's :data:`NOISE_COLUMNS` from its checkpoints' embedding_noise tables (``{step: table}``):
    each prompt counts once."""
    rows = pd.concat([table.assign(step=step) for step, table in tables.items()], ignore_index=True)
    out = rows.groupby(["step", "level", "layer"], sort=True)["cosine"].agg(["mean", "std", "size"]).reset_index()
    return out.set_axis(NOISE_COLUMNS, axis=1)
