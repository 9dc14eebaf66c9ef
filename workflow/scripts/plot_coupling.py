from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from crosslayer.coupling.plots import (
    block_window,
    plot_block_grid,
    plot_coupling_graph,
    plot_trajectories_2d,
    plot_variant_profiles,
)
from crosslayer.coupling.tables import TOKEN_WISE, load_checkpoint
from crosslayer.plotting import format_step, pick_steps, plot_depth_profile, save_png_and_pdf, set_step_axis

model, steps, dpi, metric = (snakemake.wildcards.model, snakemake.params.steps, snakemake.params.dpi,
                             snakemake.params.metric)
output, tables = snakemake.output, {name: pd.read_csv(snakemake.input[name], sep="\t")
                                    for name in snakemake.params.tables}
shown = sorted({steps[0], steps[-1]})  # the random-init null (when step 0 is configured) and the last step
data = {step: load_checkpoint(snakemake.input.npz[steps.index(step)]) for step in shown}
Ks = [int(k) for k in data[steps[-1]]["Ks"]]
K_fig, K_main = Ks[0], Ks[-1]  # |A| blocks at the smallest K; summaries at the largest (the released notebook's)
null_note = "step 0 = random init" if steps[0] == 0 else f"first step {steps[0]}"
# x^L after the final norm (the paper's eq. 7; unsuffixed columns) or before it (_raw)
raw = "" if snakemake.params.final_norm else "_raw"
x_last = "x^L after the final norm" if snakemake.params.final_norm else "x^L before the final norm"


def save(fig, name):
    save_png_and_pdf(fig, getattr(output, name), dpi=dpi)  # the PDFs are listed in output.pdfs


def by_step(table, index, **query):
    for key, value in query.items():
        table = table[table[key] == value]
    return {step: part.set_index(index) for step, part in table.groupby("step")}


# Figures show plain prompts; chain-of-thought ones (coupling.prompts.cot) only beside them (Fig. 15)
depthwise = by_step(tables["depthwise"], "other", K=K_main, variant="plain")


def _plain_tokens(checkpoint):
    return (np.array(checkpoint["variants"]) == "plain")[checkpoint["token_prompt"]]


def coupling_matrix(step):
    """(L, L) mean coupling of layer l (rows) on layer l''s basis at the largest K."""
    return depthwise[step].reset_index().pivot(index="layer", columns="other", values="coupling_mean").to_numpy()


# 1. depth-wise |A| grids (Fig. 3) and the mean coupling matrix, first vs last step
L = data[steps[-1]]["depthwise"].shape[-1]
window = block_window(L, *snakemake.params.example_blocks)
fig, axes = plt.subplots(2, len(shown), figsize=(5.2 * len(shown), 9.5), layout="constrained", squeeze=False)
for col, step in enumerate(shown):
    blocks = data[step]["example_abs_coupling"][np.ix_(window, window)]
    image = plot_block_grid(axes[0, col], blocks, labels=(window, window))
    axes[0, col].set(title=f"step {format_step(step)}: |A| (K = {K_fig}), blocks {window[0]}-{window[-1]}",
                     xlabel="basis layer l'", ylabel="Jacobian layer l")
    fig.colorbar(image, ax=axes[0, col], shrink=0.7)
    mesh = axes[1, col].imshow(np.where(np.eye(L, dtype=bool), np.nan, coupling_matrix(step)), cmap="viridis",
                               vmin=-1, vmax=0)
    axes[1, col].set(title=f"mean coupling (K = {K_main}, {metric})", xlabel="basis layer l'", ylabel="layer l",
                     xticks=range(L), yticks=range(L))
    fig.colorbar(mesh, ax=axes[1, col], shrink=0.7, label="coupling = − mis-coupling")
last_block = "with" if snakemake.params.final_norm else "without"
example = str(data[steps[-1]]["example_prompt"])
fig.suptitle(f"{model}: depth-wise coupling of J_tt across layers ({null_note}; last block {last_block} the final "
             f"norm)\ntop: the prompt {example!r}; bottom: mean over the plain prompts")
save(fig, "depthwise")

# 2. token-wise grids (Figs 4, 18, 19) of the first layer pair, first prompt
last = data[steps[-1]]
if "tw_abs_self" in last:
    l, lp = (int(v) for v in last["layer_pairs"][0])
    titles = {"self": "self: J_tt vs J_t't'", "fixed_input": "fixed input token t1 = 0",
              "fixed_output": "fixed output token t2 = last"}
    axis = {"self": ("t'", "t"), "fixed_input": ("t2'", "t2"), "fixed_output": ("t1'", "t1")}
    fig, axes = plt.subplots(len(shown), 3, figsize=(15, 5 * len(shown)), layout="constrained", squeeze=False)
    for row, step in enumerate(shown):
        for col, kind in enumerate(TOKEN_WISE):
            blocks = data[step][f"tw_abs_{kind}"][0][:8, :8]
            plot_block_grid(axes[row, col], blocks)
            axes[row, col].set_title(f"step {format_step(step)} — {titles[kind]}", fontsize="medium")
            axes[row, col].set(xlabel=f"basis token {axis[kind][0]} (layer {lp})",
                               ylabel=f"Jacobian token {axis[kind][1]} (layer {l})")
    fig.suptitle(f"{model}: token-wise |A| (K = {K_fig}) of J^{l} on the singular vectors of J^{lp}, first prompt")
else:
    fig, ax = plt.subplots(figsize=(6, 2), layout="constrained")
    ax.text(0.5, 0.5, "token-wise coupling is off (coupling.token_wise.prompts: 0)", ha="center", va="center")
    ax.set_axis_off()
save(fig, "tokenwise")

# 3. coupling over training (Fig. 1b): depth-wise per K, token-wise per kind
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
plain = tables["steps"].query("source == 'all' and variant == 'plain'")
for K, part in plain.groupby("K"):
    axes[0].errorbar(part.step, part.coupling_mean, yerr=part.coupling_sd, marker="o", ms=3, capsize=2, label=f"K = {K}")
axes[0].set(ylabel=f"mean depth-wise coupling ({metric})", title="depth-wise (mean ± sd over prompts)")
tw = tables["tokenwise"][tables["tokenwise"].K == K_main]
for (kind, l, lp), part in tw.groupby(["kind", "layer", "other"]):
    axes[1].plot(part.step, part.coupling_mean, marker="o", ms=3, label=f"{kind} ({l}, {lp})")
axes[1].set(ylabel="mean token-wise coupling", title=f"token-wise (K = {K_main}, off-diagonal token pairs)")
for ax in axes:
    set_step_axis(ax, steps)
    ax.legend(frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: coupling over training")
save(fig, "over_training")

# 4. regularity (Fig. 5): LSS and ED distributions, first vs last step, and their medians over training
fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), layout="constrained")
for col, (name, label) in enumerate((("lss", "line-shape score (≥ 1; 1 = straight)"),
                                     ("ed", "expodistance (0 = exact exponential norm growth)"))):
    values = {step: data[step][name + raw][_plain_tokens(data[step]) & np.isfinite(data[step][name + raw])]
              for step in shown}
    high = np.quantile(np.concatenate(list(values.values())), 0.98)
    for step in shown:
        axes[0, col].hist(np.clip(values[step], None, high), bins=40, histtype="step", lw=1.4,
                          label=f"step {format_step(step)}", color="0.5" if step == steps[0] else "C0")
    axes[0, col].set(xlabel=f"{label}; beyond the 98th percentile drawn at it", ylabel="tokens")
    axes[0, col].legend(frameon=False, fontsize="small")
    part = plain[plain.K == K_main]
    axes[1, col].plot(part.step, part[f"{name}{raw}_median"], marker="o", ms=3, color="C0")
    axes[1, col].fill_between(part.step, part[f"{name}{raw}_q1"], part[f"{name}{raw}_q3"], alpha=0.2, lw=0)
    axes[1, col].set(ylabel=f"{name.upper()} median (IQR band)")
    set_step_axis(axes[1, col], steps)
fig.suptitle(f"{model}: regularity of token trajectories (every token of every plain prompt; {x_last})")
save(fig, "regularity")

# 5. norm and windowed regularity vs depth (Fig. 30), one line per step
regularity = by_step(tables["regularity"], "depth", variant="plain")
fig, axes = plt.subplots(1, 4, figsize=(19, 4), layout="constrained")
for ax, (column, label) in zip(axes, ((f"norm{raw}_median", "‖x^l‖ (median over tokens)"),
                                      (f"lss_windowed{raw}_median", f"windowed LSS (width {snakemake.params.window})"),
                                      (f"ed_windowed{raw}_median", f"windowed ED (width {snakemake.params.window})"),
                                      ("logit_entropy_median", "logit-lens entropy (nats)"))):
    plot_depth_profile(ax, regularity, column)
    ax.set(xlabel="depth l (0 = embeddings, L = last block output)", ylabel=label)
axes[0].set_yscale("log")
axes[0].legend(frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: residual-stream norm and trajectory regularity by depth ({x_last})")
save(fig, "norms")

# 6. 2-D PCA of the first prompt's trajectories: all, shallow and deep states (Fig. 12)
n_pca = min(len(data[step]["pca"]) for step in shown)
fit_states = {"last": "X^L, the fit", "all": "all states, the fit"}[snakemake.params.pca_fit]
half = (L + 1) // 2
rows = {"all states": range(L + 1), f"shallow (0-{half - 1})": range(half), f"deep ({half}-{L})": range(half, L + 1)}
fig, axes = plt.subplots(3, len(shown), figsize=(5 * len(shown), 12), layout="constrained", squeeze=False)
for col, step in enumerate(shown):
    for row, (label, depths) in enumerate(rows.items()):
        if not n_pca:
            axes[row, col].text(0.5, 0.5, "no PCA kept (coupling.pca_prompts: 0)", ha="center")
            continue
        points = plot_trajectories_2d(axes[row, col], data[step]["pca"][0], depths=depths)
        ratio = data[step]["pca_explained"][0]
        axes[row, col].set_title(f"step {format_step(step)}, {label} ({ratio.sum():.0%} of the variance of "
                                 f"{fit_states})", fontsize="small")
    if n_pca:
        fig.colorbar(points, ax=axes[:, col], label="depth", shrink=0.6)
prompt = data[steps[-1]]["prompt_ids"][0]
fig.suptitle(f"{model}: trajectories of prompt {prompt} on their top two principal components ({x_last})")
save(fig, "pca")

# 7. per-layer coupling with all other layers (Fig. 15)
fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
plot_depth_profile(ax, by_step(tables["profile"], "layer", K=K_main, source="all", variant="plain"), "coupling")
ax.set(ylabel=f"coupling with all other layers (K = {K_main})")
ax.legend(frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: which layers are coupled with the rest")
save(fig, "profile")

# 8. layers as a graph, edges by mean coupling, at the first, a middle and the last step (Figs 1c-e)
graph_steps = pick_steps(steps, 3)
matrices = {step: coupling_matrix(step) for step in graph_steps}
pairs = np.concatenate([(M + M.T)[~np.eye(L, dtype=bool)] / 2 for M in matrices.values()])
fig, axes = plt.subplots(1, len(graph_steps), figsize=(4.2 * len(graph_steps), 4.6), layout="constrained",
                         squeeze=False)
for ax, step in zip(axes[0], graph_steps):
    plot_coupling_graph(ax, matrices[step], vmin=pairs.min(), vmax=pairs.max())
    ax.set_title(f"step {format_step(step)}", fontsize="medium")
fig.suptitle(f"{model}: layers joined by their mean depth-wise coupling (K = {K_main}, {metric}; edge width and "
             f"opacity from {pairs.min():.2f} to {pairs.max():.2f})", fontsize="medium")
save(fig, "graph")

# 9. plain vs chain-of-thought prompts, per-layer coupling of each source with both (Fig. 15, GSM8K)
profile = tables["profile"].query("K == @K_main and step == @steps[-1] and source != 'all'")
with_cot = sorted(set(profile.source[profile.variant == "cot"]))
fig, axes = plt.subplots(1, max(len(with_cot), 1), figsize=(5.5 * max(len(with_cot), 1), 4), layout="constrained",
                         squeeze=False)
for ax, source in zip(axes[0], with_cot):
    plot_variant_profiles(ax, profile[profile.source == source])
    ax.set(title=source, ylabel=f"coupling with all other layers (K = {K_main})")
if not with_cot:
    axes[0, 0].text(0.5, 0.5, "no chain-of-thought prompts (coupling.prompts.cot: false)", ha="center", va="center")
    axes[0, 0].set_axis_off()
fig.suptitle(f"{model}: plain vs chain-of-thought prompts, step {format_step(steps[-1])}")
save(fig, "cot")

# 10. windowed LSS and ED at fixed depths over training (Figs 27-29; the paper: blocks 5, 15, 30 of 36)
plain_regularity = tables["regularity"].query("variant == 'plain'")
inside = sorted(set(plain_regularity.dropna(subset=[f"lss_windowed{raw}_median"]).depth))
depths = sorted({inside[round(q * (len(inside) - 1))] for q in (1 / 6, 1 / 2, 5 / 6)}) if inside else []
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
for ax, (name, label) in zip(axes, (("lss", "windowed LSS"), ("ed", "windowed ED"))):
    for depth in depths:
        part = plain_regularity[plain_regularity.depth == depth]
        ax.plot(part.step, part[f"{name}_windowed{raw}_median"], marker="o", ms=3, label=f"depth {depth}")
    set_step_axis(ax, steps)
    ax.set(ylabel=f"{label} (width {snakemake.params.window}, median over tokens)")
    ax.legend(frameon=False, fontsize="small")
fig.suptitle(f"{model}: trajectory regularity at fixed depths over training ({x_last})")
save(fig, "fixed_depths")

# 11. top singular values of the residual Jacobians by depth, first vs last step (Figs 33, 34)
fig, axes = plt.subplots(1, len(shown), figsize=(5.5 * len(shown), 4), layout="constrained", squeeze=False,
                         sharey=True)
for ax, step in zip(axes[0], shown):
    values = data[step]["singular_values"][np.array(data[step]["variants"]) == "plain"]  # (P, L, max K)
    for index in sorted({1, K_fig, values.shape[-1]}):
        ax.plot(range(values.shape[1]), np.median(values[..., index - 1], axis=0), marker="o", ms=3,
                label=f"σ_{index}")
    ax.set(yscale="log", xlabel="layer l", title=f"step {format_step(step)}")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.legend(frameon=False, fontsize="small")
axes[0, 0].set_ylabel("singular value of J^l_tt (median over prompts)")
fig.suptitle(f"{model}: singular values of the residual Jacobians by depth ({null_note})")
save(fig, "singular_values")

# 12. prompt length against the prompt's mean depth-wise coupling, last step (Fig. 9, right)
prompt_table = tables["prompts"].query("step == @steps[-1]")
fig, ax = plt.subplots(figsize=(6, 4.5), layout="constrained")
for variant, part in prompt_table.groupby("variant"):
    ax.scatter(part.n_tokens, part[f"coupling_K{K_main}"], s=10, alpha=0.7, label=variant)
ax.set(xlabel="prompt length (tokens)", ylabel=f"mean depth-wise coupling (K = {K_main}, {metric})")
ax.legend(frameon=False, fontsize="small")
fig.suptitle(f"{model}: prompt length vs coupling, step {format_step(steps[-1])}")
save(fig, "prompt_length")
