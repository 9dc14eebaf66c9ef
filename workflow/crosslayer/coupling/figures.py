"""Report figures of one model for paper 002 (block coupling), composed from the Axes-level ``plot_*`` of
:mod:`crosslayer.coupling.plots` and :mod:`crosslayer.plotting`.

:func:`load_figure_inputs` reads what rule ``plot_coupling`` reads into a :class:`CouplingFigureInputs`;
every function named ``*_figure`` takes that object and returns a new matplotlib Figure (it never
saves). :data:`FIGURES` maps each of the rule's outputs, in order, to its function. The figures over
all models are in :mod:`crosslayer.coupling.figures_models`.
"""

from dataclasses import dataclass

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crosslayer.coupling.plots import (
    block_window,
    needs_block_scales,
    plot_block_grid,
    plot_coupling_graph,
    plot_noise_depth,
    plot_noise_levels,
    plot_trajectories_2d,
    plot_variant_profiles,
)
from crosslayer.coupling.tables import TOKEN_WISE, load_checkpoint, prompt_groups
from crosslayer.plotting import format_step, pick_steps, plot_depth_profile, set_step_axis

__all__ = [
    "CouplingFigureInputs", "load_figure_inputs", "depthwise_figure", "tokenwise_figure", "over_training_figure",
    "regularity_figure", "norms_figure", "pca_figure", "profile_figure", "graph_figure", "cot_figure",
    "fixed_depths_figure", "singular_values_figure", "prompt_length_figure", "FIGURES", "NoiseFigureInputs",
    "noise_figure", "NOISE_FIGURES",
]


@dataclass(frozen=True, eq=False)
class CouplingFigureInputs:
    """What the figures of one model draw.

    Attributes
    ----------
    model : str
    steps : list of int
        The model's checkpoints, in the rule's order (sorted).
    checkpoints : dict of int -> dict
        :func:`~crosslayer.coupling.tables.load_checkpoint` of the first and the last step.
    tables : dict of str -> pandas.DataFrame
        The tables of :func:`~crosslayer.coupling.tables.summarize_steps` (``prompts``, ``steps``,
        ``depthwise``, ``profile``, ``regularity``, ``tokenwise``).
    metric : str
        The mis-coupling metric of the tables (``coupling.metric``).
    window : int
        Width of the windowed statistics (``coupling.window``).
    pca_fit : {"last", "all"}
        The states the PCA was fit on.
    final_norm : bool
        Trajectories end after the final norm (unsuffixed columns) or before it (``_raw``).
    example_blocks : (int, int)
        First and last block of the |A| grids.
    unpooled : tuple of str
        Prompt sources left out of the pooled set (a dataset's ``pooled: false``): the figures that
        read the checkpoints' arrays leave them out too, as the tables' source ``all`` does.
    regularity_source : str
        The prompt group of the figures by depth (``coupling.regularity_source``: ``all`` or a source).
    """

    model: str
    steps: list
    checkpoints: dict
    tables: dict
    metric: str
    window: int
    pca_fit: str
    final_norm: bool
    example_blocks: tuple
    unpooled: tuple = ()
    regularity_source: str = "all"

    @property
    def shown(self):
        """The random-init null (when step 0 is configured) or first step, and the last step."""
        return sorted({self.steps[0], self.steps[-1]})

    @property
    def last(self):
        """The last checkpoint's arrays."""
        return self.checkpoints[self.steps[-1]]

    @property
    def n_layers(self):
        """L, the model's blocks."""
        return self.last["depthwise"].shape[-1]

    @property
    def Ks(self):
        """The Ks the last checkpoint was measured at: |A| grids at the smallest, summaries at the
        largest (the released notebook's)."""
        return [int(k) for k in self.last["Ks"]]

    @property
    def raw(self):
        """Column suffix of the trajectory statistics: x^L after the final norm (the paper's eq. 7;
        ``""``) or before it (``"_raw"``)."""
        return "" if self.final_norm else "_raw"


def load_figure_inputs(*, model, steps, npz, tables, metric, window, pca_fit, final_norm, example_blocks,
                       unpooled=(), regularity_source="all"):
    """Read rule ``plot_coupling``'s inputs: the first and the last checkpoint and the summary tables.

    Parameters
    ----------
    model, steps
        As :class:`CouplingFigureInputs`.
    npz : sequence of path
        One ``.coupling.npz`` per step, in the order of `steps`.
    tables : mapping of str -> path
        Table name -> its TSV (``summarize_coupling``).
    metric, window, pca_fit, final_norm, example_blocks, unpooled, regularity_source
        As :class:`CouplingFigureInputs`.

    Returns
    -------
    CouplingFigureInputs
    """
    steps = list(steps)
    shown = sorted({steps[0], steps[-1]})
    return CouplingFigureInputs(
        model=model, steps=steps, checkpoints={step: load_checkpoint(npz[steps.index(step)]) for step in shown},
        tables={name: pd.read_csv(path, sep="\t") for name, path in tables.items()}, metric=metric,
        window=window, pca_fit=pca_fit, final_norm=final_norm, example_blocks=tuple(example_blocks),
        unpooled=tuple(unpooled), regularity_source=regularity_source)


def _null_note(inputs):
    return "step 0 = random init" if inputs.steps[0] == 0 else f"first step {inputs.steps[0]}"


def _x_last(inputs):
    return "x^L after the final norm" if inputs.final_norm else "x^L before the final norm"


def _by_step(table, index, **query):
    """``{step: rows matching query, indexed by index}``."""
    for key, value in query.items():
        table = table[table[key] == value]
    return {step: part.set_index(index) for step, part in table.groupby("step")}


def _plain_steps(inputs):
    # figures show plain prompts; chain-of-thought ones (coupling.prompts.cot) only beside them (Fig. 15)
    return inputs.tables["steps"].query("source == 'all' and variant == 'plain'")


def _plain_prompts(inputs, checkpoint):
    """The pooled plain prompts of a checkpoint's arrays: the tables' group (source ``all``, plain)."""
    none = np.zeros(len(checkpoint["variants"]), dtype=bool)
    return prompt_groups(checkpoint, inputs.unpooled).get(("all", "plain"), none)


def _regularity(inputs):
    """The plain rows of ``coupling.regularity_source`` in the regularity table (a table written
    before 2026-11-26 holds source ``all`` alone, without the column)."""
    table, source = inputs.tables["regularity"], inputs.regularity_source
    table = table[table.source == source] if "source" in table else table.iloc[: len(table) * (source == "all")]
    if table.empty:
        raise ValueError(f"coupling.regularity_source: {source!r} has no rows in the regularity table; choose all or "
                         "a prompt source of the run (re-run summarize_coupling if its table predates the source)")
    return table[table.variant == "plain"]


def _regularity_prompts(inputs):
    """Which prompts the figures by depth show, for titles."""
    source = inputs.regularity_source
    return "plain prompts" + ("" if source == "all" else f" of {source}")


def _coupling_matrix(inputs, step):
    """(L, L) mean coupling of layer l (rows) on layer l''s basis at the largest K, plain prompts."""
    table = _by_step(inputs.tables["depthwise"], "other", K=inputs.Ks[-1], variant="plain")[step]
    return table.reset_index().pivot(index="layer", columns="other", values="coupling_mean").to_numpy()


def depthwise_figure(inputs):
    """Depth-wise |A| grids of the example prompt (Fig. 3) over the mean coupling matrix of the plain
    prompts, first vs last step."""
    shown, (K_fig, K_main) = inputs.shown, (inputs.Ks[0], inputs.Ks[-1])
    L = inputs.n_layers
    window = block_window(L, *inputs.example_blocks)
    fig, axes = plt.subplots(2, len(shown), figsize=(5.2 * len(shown), 9.5), layout="constrained", squeeze=False)
    for col, step in enumerate(shown):
        blocks = inputs.checkpoints[step]["example_abs_coupling"][np.ix_(window, window)]
        per_block = needs_block_scales(blocks)  # else a few bright blocks hide the rest, the diagonal too
        image = plot_block_grid(axes[0, col], blocks, labels=(window, window), per_block=per_block)
        axes[0, col].set(title=f"step {format_step(step)}: |A| (K = {K_fig}), blocks {window[0]}-{window[-1]}"
                         + (", each block on its own scale" if per_block else ""),
                         xlabel="basis layer l'", ylabel="Jacobian layer l")
        fig.colorbar(image, ax=axes[0, col], shrink=0.7, label="|A| / its block's maximum" if per_block else "|A|")
        mesh = axes[1, col].imshow(np.where(np.eye(L, dtype=bool), np.nan, _coupling_matrix(inputs, step)),
                                   cmap="viridis", vmin=-1, vmax=0)
        axes[1, col].set(title=f"mean coupling (K = {K_main}, {inputs.metric})", xlabel="basis layer l'",
                         ylabel="layer l", xticks=range(L), yticks=range(L))
        fig.colorbar(mesh, ax=axes[1, col], shrink=0.7, label="coupling = − mis-coupling")
    last_block = "with" if inputs.final_norm else "without"
    example = str(inputs.last["example_prompt"])
    fig.suptitle(f"{inputs.model}: depth-wise coupling of J_tt across layers ({_null_note(inputs)}; last block "
                 f"{last_block} the final norm)\ntop: the prompt {example!r}; bottom: mean over the plain prompts")
    return fig


def tokenwise_figure(inputs):
    """Token-wise |A| grids (Figs 4, 18, 19) of the first layer pair and prompt, first vs last step; a
    note when token-wise coupling is off."""
    if "tw_abs_self" not in inputs.last:
        fig, ax = plt.subplots(figsize=(6, 2), layout="constrained")
        ax.text(0.5, 0.5, "token-wise coupling is off (coupling.token_wise.prompts: 0)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    shown = inputs.shown
    l, lp = (int(v) for v in inputs.last["layer_pairs"][0])
    titles = {"self": "self: J_tt vs J_t't'", "fixed_input": "fixed input token t1 = 0",
              "fixed_output": "fixed output token t2 = last"}
    axis = {"self": ("t'", "t"), "fixed_input": ("t2'", "t2"), "fixed_output": ("t1'", "t1")}
    fig, axes = plt.subplots(len(shown), 3, figsize=(15, 5 * len(shown)), layout="constrained", squeeze=False)
    for row, step in enumerate(shown):
        for col, kind in enumerate(TOKEN_WISE):
            plot_block_grid(axes[row, col], inputs.checkpoints[step][f"tw_abs_{kind}"][0][:8, :8])
            axes[row, col].set_title(f"step {format_step(step)} — {titles[kind]}", fontsize="medium")
            axes[row, col].set(xlabel=f"basis token {axis[kind][0]} (layer {lp})",
                               ylabel=f"Jacobian token {axis[kind][1]} (layer {l})")
    fig.suptitle(f"{inputs.model}: token-wise |A| (K = {inputs.Ks[0]}) of J^{l} on the singular vectors of J^{lp}, "
                 "first prompt")
    return fig


def over_training_figure(inputs):
    """Coupling over training (Fig. 1b): depth-wise per K (mean ± sd over prompts), token-wise per kind
    and layer pair at the largest K."""
    K_main = inputs.Ks[-1]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for K, part in _plain_steps(inputs).groupby("K"):
        axes[0].errorbar(part.step, part.coupling_mean, yerr=part.coupling_sd, marker="o", ms=3, capsize=2,
                         label=f"K = {K}")
    axes[0].set(ylabel=f"mean depth-wise coupling ({inputs.metric})", title="depth-wise (mean ± sd over prompts)")
    tokenwise = inputs.tables["tokenwise"][inputs.tables["tokenwise"].K == K_main]
    for (kind, l, lp), part in tokenwise.groupby(["kind", "layer", "other"]):
        axes[1].plot(part.step, part.coupling_mean, marker="o", ms=3, label=f"{kind} ({l}, {lp})")
    axes[1].set(ylabel="mean token-wise coupling", title=f"token-wise (K = {K_main}, off-diagonal token pairs)")
    for ax in axes:
        set_step_axis(ax, inputs.steps)
        ax.legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: coupling over training")
    return fig


def regularity_figure(inputs):
    """Regularity of token trajectories (Fig. 5): LSS and ED of every plain token, first vs last step,
    over their medians (IQR band) over training."""
    shown, raw, steps = inputs.shown, inputs.raw, inputs.steps
    plain = _plain_steps(inputs)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), layout="constrained")
    for col, (name, label) in enumerate((("lss", "line-shape score (≥ 1; 1 = straight)"),
                                         ("ed", "expodistance (0 = exact exponential norm growth)"))):
        values = {}
        for step in shown:
            data = inputs.checkpoints[step]
            tokens = _plain_prompts(inputs, data)[data["token_prompt"]]
            values[step] = data[name + raw][tokens & np.isfinite(data[name + raw])]
        high = np.quantile(np.concatenate(list(values.values())), 0.98)
        for step in shown:
            axes[0, col].hist(np.clip(values[step], None, high), bins=40, histtype="step", lw=1.4,
                              label=f"step {format_step(step)}", color="0.5" if step == steps[0] else "C0")
        axes[0, col].set(xlabel=f"{label}; beyond the 98th percentile drawn at it", ylabel="tokens")
        axes[0, col].legend(frameon=False, fontsize="small")
        part = plain[plain.K == inputs.Ks[-1]]
        axes[1, col].plot(part.step, part[f"{name}{raw}_median"], marker="o", ms=3, color="C0")
        axes[1, col].fill_between(part.step, part[f"{name}{raw}_q1"], part[f"{name}{raw}_q3"], alpha=0.2, lw=0)
        axes[1, col].set(ylabel=f"{name.upper()} median (IQR band)")
        set_step_axis(axes[1, col], steps)
    fig.suptitle(f"{inputs.model}: regularity of token trajectories (every token of every plain prompt; "
                 f"{_x_last(inputs)})")
    return fig


def norms_figure(inputs):
    """Residual-stream norm, windowed LSS, equidistance and ED, and logit-lens entropy against depth,
    one line per step (Figs 26 and 30); a table without equidistance (written before it) says so."""
    raw, window = inputs.raw, inputs.window
    regularity = _by_step(_regularity(inputs), "depth")
    fig, axes = plt.subplots(1, 5, figsize=(23, 4), layout="constrained")
    for ax, (column, label) in zip(axes, ((f"norm{raw}_median", "‖x^l‖ (median over tokens)"),
                                          (f"lss_windowed{raw}_median", f"windowed LSS (width {window})"),
                                          (f"eq_windowed{raw}_median", f"windowed equidistance (width {window})"),
                                          (f"ed_windowed{raw}_median", f"windowed ED (width {window})"),
                                          ("logit_entropy_median", "logit-lens entropy (nats)"))):
        table = _regularity(inputs)
        if column not in table or table[column].isna().all():
            ax.text(0.5, 0.5, "not in this run's files:\nre-run block_coupling", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set(ylabel=label)
            continue
        plot_depth_profile(ax, regularity, column)
        ax.set(xlabel="depth l (0 = embeddings, L = last block output)", ylabel=label)
    axes[0].set_yscale("log")
    axes[0].legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: residual-stream norm and trajectory regularity by depth "
                 f"({_regularity_prompts(inputs)}; {_x_last(inputs)})")
    return fig


def pca_figure(inputs):
    """The trajectories of the paper's prompt (``coupling.example_prompt``, "What is the capital of
    France? The capital is") on their top two principal components, or of the set's first prompt
    where a checkpoint file has none: all, shallow and deep states (Fig. 12), first vs last step."""
    shown = inputs.shown
    example = all("example_pca" in inputs.checkpoints[step] for step in shown)
    checkpoints = {step: ({"pca": c["example_pca"], "pca_explained": c["example_pca_explained"]} if example else c)
                   for step, c in inputs.checkpoints.items() if step in shown}
    L = inputs.n_layers
    n_pca = min(len(checkpoints[step]["pca"]) for step in shown)
    fit_states = {"last": "X^L, the fit", "all": "all states, the fit"}[inputs.pca_fit]
    half = (L + 1) // 2
    rows = {"all states": range(L + 1), f"shallow (0-{half - 1})": range(half),
            f"deep ({half}-{L})": range(half, L + 1)}
    fig, axes = plt.subplots(3, len(shown), figsize=(5 * len(shown), 12), layout="constrained", squeeze=False)
    for col, step in enumerate(shown):
        for row, (label, depths) in enumerate(rows.items()):
            if not n_pca:
                axes[row, col].text(0.5, 0.5, "no PCA kept (coupling.pca_prompts: 0)", ha="center")
                continue
            points = plot_trajectories_2d(axes[row, col], checkpoints[step]["pca"][0], depths=depths)
            ratio = checkpoints[step]["pca_explained"][0]
            axes[row, col].set_title(f"step {format_step(step)}, {label} ({ratio.sum():.0%} of the variance of "
                                     f"{fit_states})", fontsize="small")
        if n_pca:
            fig.colorbar(points, ax=axes[:, col], label="depth", shrink=0.6)
    prompt = f'"{inputs.last["example_prompt"]}"' if example else f'prompt {inputs.last["prompt_ids"][0]}'
    fig.suptitle(f"{inputs.model}: trajectories of {prompt} on their top two principal components "
                 f"({_x_last(inputs)})")
    return fig


def profile_figure(inputs):
    """Per-layer coupling with all other layers (Fig. 15), one line per step."""
    K_main = inputs.Ks[-1]
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    plot_depth_profile(ax, _by_step(inputs.tables["profile"], "layer", K=K_main, source="all", variant="plain"),
                       "coupling")
    ax.set(ylabel=f"coupling with all other layers (K = {K_main})")
    ax.legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"{inputs.model}: which layers are coupled with the rest")
    return fig


def graph_figure(inputs):
    """Layers as a graph whose edges follow the mean coupling, at the first, a middle and the last step
    (Figs 1c-e); one edge scale for all panels."""
    graph_steps = pick_steps(inputs.steps, 3)
    matrices = {step: _coupling_matrix(inputs, step) for step in graph_steps}
    L = inputs.n_layers
    pairs = np.concatenate([(M + M.T)[~np.eye(L, dtype=bool)] / 2 for M in matrices.values()])
    fig, axes = plt.subplots(1, len(graph_steps), figsize=(4.2 * len(graph_steps), 4.6), layout="constrained",
                             squeeze=False)
    for ax, step in zip(axes[0], graph_steps):
        plot_coupling_graph(ax, matrices[step], vmin=pairs.min(), vmax=pairs.max())
        ax.set_title(f"step {format_step(step)}", fontsize="medium")
    fig.suptitle(f"{inputs.model}: layers joined by their mean depth-wise coupling (K = {inputs.Ks[-1]}, "
                 f"{inputs.metric}; edge width and opacity from {pairs.min():.2f} to {pairs.max():.2f})",
                 fontsize="medium")
    return fig


def cot_figure(inputs):
    """Plain vs chain-of-thought prompts at the last step: per-layer coupling of each prompt source that
    has both (Fig. 15, GSM8K)."""
    K_main, last_step = inputs.Ks[-1], inputs.steps[-1]
    profile = inputs.tables["profile"]
    profile = profile[(profile.K == K_main) & (profile.step == last_step) & (profile.source != "all")]
    with_cot = sorted(set(profile.source[profile.variant == "cot"]))
    n = max(len(with_cot), 1)
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4), layout="constrained", squeeze=False)
    for ax, source in zip(axes[0], with_cot):
        plot_variant_profiles(ax, profile[profile.source == source])
        ax.set(title=source, ylabel=f"coupling with all other layers (K = {K_main})")
    if not with_cot:
        axes[0, 0].text(0.5, 0.5, "no chain-of-thought prompts (coupling.prompts.cot: false)", ha="center",
                        va="center")
        axes[0, 0].set_axis_off()
    fig.suptitle(f"{inputs.model}: plain vs chain-of-thought prompts, step {format_step(last_step)}")
    return fig


def fixed_depths_figure(inputs):
    """Windowed LSS and ED over training at three depths, at 1/6, 1/2 and 5/6 of those where the window
    fits (Figs 27-29; the paper: blocks 5, 15, 30 of 36)."""
    raw = inputs.raw
    plain = _regularity(inputs)
    inside = sorted(set(plain.dropna(subset=[f"lss_windowed{raw}_median"]).depth))
    depths = sorted({inside[round(q * (len(inside) - 1))] for q in (1 / 6, 1 / 2, 5 / 6)}) if inside else []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for ax, (name, label) in zip(axes, (("lss", "windowed LSS"), ("ed", "windowed ED"))):
        for depth in depths:
            part = plain[plain.depth == depth]
            ax.plot(part.step, part[f"{name}_windowed{raw}_median"], marker="o", ms=3, label=f"depth {depth}")
        set_step_axis(ax, inputs.steps)
        ax.set(ylabel=f"{label} (width {inputs.window}, median over tokens)")
        ax.legend(frameon=False, fontsize="small")
    fig.suptitle(f"{inputs.model}: trajectory regularity at fixed depths over training "
                 f"({_regularity_prompts(inputs)}; {_x_last(inputs)})")
    return fig


def singular_values_figure(inputs):
    """Median over plain prompts of the residual Jacobians' σ_1, σ_K (smallest K) and σ_Kmax by depth,
    first vs last step (Figs 33, 34)."""
    shown = inputs.shown
    fig, axes = plt.subplots(1, len(shown), figsize=(5.5 * len(shown), 4), layout="constrained", squeeze=False,
                             sharey=True)
    for ax, step in zip(axes[0], shown):
        data = inputs.checkpoints[step]
        values = data["singular_values"][_plain_prompts(inputs, data)]  # (P, L, max K)
        for index in sorted({1, inputs.Ks[0], values.shape[-1]}):
            ax.plot(range(values.shape[1]), np.median(values[..., index - 1], axis=0), marker="o", ms=3,
                    label=f"σ_{index}")
        ax.set(yscale="log", xlabel="layer l", title=f"step {format_step(step)}")
        ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
        ax.legend(frameon=False, fontsize="small")
    axes[0, 0].set_ylabel("singular value of J^l_tt (median over prompts)")
    fig.suptitle(f"{inputs.model}: singular values of the residual Jacobians by depth ({_null_note(inputs)})")
    return fig


def prompt_length_figure(inputs):
    """Prompt length against the prompt's mean depth-wise coupling at the largest K, last step, one
    colour per variant (Fig. 9, right)."""
    K_main, last_step = inputs.Ks[-1], inputs.steps[-1]
    prompts = inputs.tables["prompts"]
    if "pooled" in prompts:  # as source all
        prompts = prompts[prompts.pooled]
    fig, ax = plt.subplots(figsize=(6, 4.5), layout="constrained")
    for variant, part in prompts[prompts.step == last_step].groupby("variant"):
        ax.scatter(part.n_tokens, part[f"coupling_K{K_main}"], s=10, alpha=0.7, label=variant)
    ax.set(xlabel="prompt length (tokens)", ylabel=f"mean depth-wise coupling (K = {K_main}, {inputs.metric})")
    ax.legend(frameon=False, fontsize="small")
    fig.suptitle(f"{inputs.model}: prompt length vs coupling, step {format_step(last_step)}")
    return fig


#: Rule plot_coupling's outputs, in order, and the function drawing each.
FIGURES = {
    "depthwise": depthwise_figure,
    "tokenwise": tokenwise_figure,
    "over_training": over_training_figure,
    "regularity": regularity_figure,
    "norms": norms_figure,
    "pca": pca_figure,
    "profile": profile_figure,
    "graph": graph_figure,
    "cot": cot_figure,
    "fixed_depths": fixed_depths_figure,
    "singular_values": singular_values_figure,
    "prompt_length": prompt_length_figure,
}


@dataclass(frozen=True, eq=False)
class NoiseFigureInputs:
    """What the figure of the ``embedding_noise`` stage draws: the model and its ``noise.tsv``
    (:data:`crosslayer.coupling.tables.NOISE_COLUMNS`)."""

    model: str
    table: pd.DataFrame


def noise_figure(inputs):
    """Paper Fig. 32: noise on the embeddings against the cosine with the clean states at the first
    block's output and the last layer (left; step 0 dashed, the random-init null, when configured),
    and at every depth (right), last step."""
    table = inputs.table
    last_step = int(table["step"].max())
    last = table[table["step"] == last_step]
    n_layers = int(table["layer"].max())
    layers = {1: "first layer", n_layers: f"last layer ({n_layers})"}
    styles = {1: {"color": "tab:orange"}, n_layers: {"color": "tab:blue"}}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    plot_noise_levels(left, last, layers, styles=styles, label=f", step {format_step(last_step)}")
    if last_step != 0 and (table["step"] == 0).any():
        init = {layer: {**style, "ls": "--", "alpha": 0.6} for layer, style in styles.items()}
        plot_noise_levels(left, table[table["step"] == 0], layers, styles=init, label=", step 0")
    plot_noise_levels(left, last, {0: "embeddings"}, styles={0: {"color": "0.6", "lw": 1}})
    left.legend(frameon=False, fontsize="small")
    plot_noise_depth(right, last)
    right.legend(frameon=False, fontsize="small")
    fig.suptitle(f"{inputs.model}: noise on the embeddings, followed through the depth")
    return fig


#: Rule plot_embedding_noise's outputs.
NOISE_FIGURES = {"first_last": noise_figure}
