from _setup import start

# Guarded as schur_surgery.py: spawned Schur-form workers import this file again.
if __name__ == "__main__":
    start(snakemake)

from tqdm import tqdm

from crosslayer.dynamics.surgery import fold_bottleneck
from crosslayer.linalg.effective_rank import TORCH_MIN_WIDTH
from crosslayer.npz import open_npz


def main():
    params, schur = snakemake.params, snakemake.config["dynamics"]["schur"]
    device = schur["device"]  # speed and rounding only, as schur_surgery's: from the config, not the params
    if device != "cpu":
        from crosslayer.devices import check_device

        check_device(device, "dynamics.schur.device")
    with open_npz(snakemake.input.jacobians) as jacobians:
        # dynamics.folds 0 keeps no folds: an empty table, and the bottleneck's verdicts say not testable
        folds = jacobians["fold_means"] if "fold_means" in jacobians.files else []
    d = folds[0].shape[-1] if len(folds) else 0
    if d >= TORCH_MIN_WIDTH or device != "cpu":
        import torch

        torch.set_num_threads(snakemake.threads)
    table = fold_bottleneck(
        folds, rank=min(params.rank, d) if d else None, seed=params.seed,
        progress=lambda layers, fold: tqdm(layers, desc=f"fold {fold}: layers (last first)", unit="layer"),
        device=None if device == "cpu" else device, workers=schur["workers"], threads=snakemake.threads)
    table.to_csv(snakemake.output.table, sep="\t", index=False)


if __name__ == "__main__":
    main()
