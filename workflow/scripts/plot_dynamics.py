from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from crosslayer.dynamics.densities import eigenvalue_density
from crosslayer.dynamics.plots import (
    plot_dose_response,
    plot_eigenvalue_cloud,
    plot_layer_density,
    plot_quantile_profile,
    plot_radius_vs_rank_drop,
    plot_regime_bands,
)
from crosslayer.dynamics.regimes import REGIMES
from crosslayer.npz import open_npz
from crosslayer.plotting import format_step, pick_steps, plot_depth_profile, save_png_and_pdf

model, steps, dpi = snakemake.wildcards.model, snakemake.params.steps, snakemake.params.dpi
output = snakemake.output
profiles = {step: pd.read_csv(path, sep="\t", index_col="layer") for step, path in zip(steps, snakemake.input.tables)}
first = profiles[steps[0]]
null_note = "step 0 = random-init null, dashed" if 0 in profiles else "no step-0 checkpoint configured"


def save(fig, name):
    save_png_and_pdf(fig, getattr(output, name), dpi=dpi)  # the PDFs are listed in output.pdfs


# 1. operator geometry of the mean Jacobian, for J and J - I
panels = [
    ("self_alignment", "self-alignment of J", True),
    ("henrici", "Henrici departure of J", False),
    ("forward_alignment", "forward alignment of J (l → l+1)", True),
    ("frac_complex", "eigenvalues in complex pairs", False),
    ("self_alignment_res", "self-alignment of J − I", True),
    ("henrici_res", "Henrici departure of J − I", False),
    ("forward_alignment_res", "forward alignment of J − I", True),
    ("residual_norm_ratio", "‖J − I‖_F / ‖I‖_F", False),
]
fig, axes = plt.subplots(2, 4, figsize=(14, 6.5), layout="constrained")
for ax, (column, title, baseline) in zip(axes.flat, panels):
    plot_depth_profile(ax, profiles, column)
    if baseline:
        mean, sd = first["baseline_mean"].iloc[0], first["baseline_sd"].iloc[0]
        ax.axhspan(mean - 2 * sd, mean + 2 * sd, color="0.85", zorder=0, label="random ±2 sd")
        ax.axhline(mean, color="0.5", lw=1, ls=":")
    ax.set_title(title, fontsize="medium")
axes[0, 0].legend(frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: mean single-token block Jacobian across depth ({null_note})")
save(fig, "operators")

# 2. per-sample singular-value statistics (median and interquartile band over samples)
# (condition numbers are absent when dynamics.condition_number is false: note it in their panels)
fig, axes = plt.subplots(2, 3, figsize=(12, 6.5), layout="constrained")
for row, (suffix, op) in enumerate((("", "J"), ("_res", "J − I"))):
    name = "condition_number" + suffix
    if all(f"{q}_{name}" in p.columns for p in profiles.values() for q in ("q25", "median", "q75")):
        plot_quantile_profile(axes[row, 0], profiles, name)
        axes[row, 0].set_yscale("log")
    else:
        axes[row, 0].text(0.5, 0.5, "not computed\n(dynamics.condition_number: false)", ha="center", va="center",
                          transform=axes[row, 0].transAxes, color="0.4", fontsize="small")
        axes[row, 0].set(xticks=[], yticks=[])
    axes[row, 0].set_title(f"condition number of {op}", fontsize="medium")
    plot_quantile_profile(axes[row, 1], profiles, "participation_ratio" + suffix)
    axes[row, 1].set_title(f"participation ratio of {op}", fontsize="medium")
    plot_depth_profile(axes[row, 2], profiles, "frac_expanding" + suffix)
    axes[row, 2].set_title(f"expanding fraction |λ| > 1 of mean {op}", fontsize="medium")
axes[0, 1].legend(frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: per-sample Jacobian spectra, median and interquartile range over texts ({null_note})")
save(fig, "samples")

# 3. eigenvalue clouds per depth regime
shown = pick_steps(steps)
regimes = first["regime"].to_numpy()
present = [r for r in REGIMES if r in regimes]
n_layers = len(first)
fig, axes = plt.subplots(len(shown), len(present), figsize=(3.6 * len(present), 3.4 * len(shown)),
                         layout="constrained", squeeze=False)
for row, step in enumerate(shown):
    with open_npz(snakemake.input.eigenvalues[steps.index(step)]) as npz:
        eigenvalues = npz["eigenvalues"]
    for ax, regime in zip(axes[row], present):
        layers = np.flatnonzero(regimes == regime)
        plot_eigenvalue_cloud(ax, eigenvalues[layers], layers, n_layers=n_layers)
        span = f"layer {layers[0]}" if len(layers) == 1 else f"layers {layers[0]}–{layers[-1]}"
        ax.set_title(f"step {format_step(step)} · {regime} ({span})", fontsize="medium")
colorbar = fig.colorbar(plt.cm.ScalarMappable(plt.Normalize(-0.5, n_layers - 0.5), "viridis"), ax=axes,
                        label="layer", shrink=0.6)
colorbar.ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
fig.suptitle(f"{model}: eigenvalues of the mean Jacobian per depth regime (dotted: unit circle)")
save(fig, "eigenvalues")

# 4. cumulative effective rank (Fig. 4a), where it drops against the spectral radius (Fig. 4b), and the
# Schur dose response of the rank and of the amplification log ||J_{0->L}||_F (Fig. 5)
schur = {step: pd.read_csv(path, sep="\t") for step, path in zip(steps, snakemake.input.schur)}
modes = list(dict.fromkeys(schur[steps[0]]["mode"]))
fig, axes = plt.subplots(2, 1 + len(modes), figsize=(4.6 * (1 + len(modes)), 8.2), layout="constrained",
                         squeeze=False)
plot_depth_profile(axes[0, 0], profiles, "cumulative_effective_rank")
axes[0, 0].set(xlabel="start layer $l$", ylabel=r"effective rank of $J_{l \to L}$")
ranks = pd.concat([p["cumulative_effective_rank"] for p in profiles.values()])
if ranks.max() > 10 * ranks.min():  # paper scale: from d down to a handful
    axes[0, 0].set_yscale("log")
axes[0, 0].set_title("cumulative Jacobian", fontsize="medium")
axes[0, 0].legend(frameon=False, fontsize="x-small")
plot_radius_vs_rank_drop(axes[1, 0], profiles)
axes[1, 0].set_title("rank drop at each layer vs its spectral radius", fontsize="medium")
axes[1, 0].legend(frameon=False, fontsize="x-small")
ends = [steps[0], steps[-1]] if len(steps) > 1 else steps
for col, mode in enumerate(modes, start=1):
    for row, (column, what) in enumerate((("effective_rank", "rank"), ("log_frobenius", "amplification"))):
        ax = axes[row, col]
        for color, step in zip(("0.5", "C3"), ends):
            plot_dose_response(ax, schur[step][schur[step]["mode"] == mode], color=color,
                               label=f"step {format_step(step)}", column=column)
        ax.set_title(f"Schur surgery of {mode.replace('-', '−')}, from layer 0: {what}", fontsize="medium")
handles = [Line2D([], [], color="k", lw=1.8, marker="o", label="dose: $Q (D + \\alpha N) Q^H$"),
           Line2D([], [], color="k", ls="--", marker="^", label="control A: Gaussian $N$, same $\\|N\\|_F$"),
           Line2D([], [], color="k", ls=":", marker="s", label="control B: Haar-random basis")]
axes[0, 1].legend(handles=[*axes[0, 1].get_legend_handles_labels()[0], *handles], frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: dimensional funnelling through depth ({null_note})")
save(fig, "cumulative")

# 5. the depth regimes and the two measures that define them (Figs 2, S2): condition number and self-alignment
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
name = "condition_number"
if all(f"{q}_{name}" in p.columns for p in profiles.values() for q in ("q25", "median", "q75")):
    plot_quantile_profile(axes[0], profiles, name)
    axes[0].set_yscale("log")
    axes[0].set_title("condition number of J (median, IQR over texts)", fontsize="medium")
else:  # dynamics.condition_number: false
    plot_quantile_profile(axes[0], profiles, "participation_ratio")
    axes[0].set_title("participation ratio of J (no condition numbers computed)", fontsize="medium")
plot_depth_profile(axes[1], profiles, "self_alignment")
axes[1].axhline(first["baseline_mean"].iloc[0], color="0.5", lw=1, ls=":", label="random subspaces")
axes[1].set_title("self-alignment of mean J", fontsize="medium")
for ax in axes:
    plot_regime_bands(ax, regimes)
axes[1].legend(frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: depth regimes (shaded) and the measures that define them ({null_note})")
save(fig, "regimes")

# 6. per-layer eigenvalue densities (Fig. S1): |lambda| and Re lambda of each layer, on shared bins
fig, axes = plt.subplots(len(shown), 2, figsize=(10, 3.4 * len(shown)), layout="constrained", squeeze=False)
spectra = {}
for step in shown:
    with open_npz(snakemake.input.eigenvalues[steps.index(step)]) as npz:
        spectra[step] = npz["eigenvalues"]
for col, (part, label) in enumerate((("modulus", "|λ|"), ("real", "Re λ"))):
    values = np.concatenate([np.abs(lam) if part == "modulus" else lam.real for lam in spectra.values()], axis=None)
    shared = tuple(np.percentile(values, [0.5, 99.5]))  # a few outlying modes would squeeze the bulk into one bin
    for row, step in enumerate(shown):
        density, edges = eigenvalue_density(spectra[step], part=part, value_range=shared)
        mesh = plot_layer_density(axes[row, col], density, edges, reference=1.0)
        mesh.set_norm(matplotlib.colors.PowerNorm(0.5))
        axes[row, col].set(xlabel=label, title=f"step {format_step(step)}: density of {label} per layer")
        fig.colorbar(mesh, ax=axes[row, col], label="density (square-root scale)")
fig.suptitle(f"{model}: eigenvalue densities of the mean Jacobian per layer, central 99% of all values (dotted: 1)")
save(fig, "density")
