from _setup import start

start(snakemake)

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from crosslayer.plots import plot_depth_profile

model = snakemake.wildcards.model
profiles = {
    step: pd.read_csv(path, sep="\t", index_col="layer") for step, path in zip(snakemake.params.steps, snakemake.input.tables)
}
panels = [
    ("self_alignment", "self-alignment of J"),
    ("self_alignment_res", "self-alignment of J − I"),
    ("henrici", "Henrici departure of J"),
    ("frac_complex", "eigenvalues in complex pairs"),
    ("frac_expanding", "expanding fraction |λ| > 1"),
    ("residual_norm_ratio", "‖J − I‖_F / ‖I‖_F"),
]
fig, axes = plt.subplots(2, 3, figsize=(11, 6), layout="constrained")
for ax, (column, title) in zip(axes.flat, panels):
    plot_depth_profile(ax, profiles, column)
    if column.startswith("self_alignment"):
        baseline = next(iter(profiles.values()))["baseline_mean"].iloc[0]
        ax.axhline(baseline, color="0.5", lw=1, ls=":", label="random baseline")
    ax.set_title(title)
axes.flat[0].legend(frameon=False, fontsize="x-small")
fig.suptitle(f"{model}: mean single-token block Jacobian across depth (step 0 = random-init null, dashed)")
fig.savefig(snakemake.output.depth, dpi=snakemake.params.dpi)
fig.savefig(snakemake.output.depth_pdf)
