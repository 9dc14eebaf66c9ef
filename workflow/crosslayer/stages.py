"""The workflow's stages in one table: for each, its paper, the model capabilities it needs, and the
tables and figures it adds to a run's final outputs (figures with their report captions).

Everything that lists stages is derived from :data:`STAGES`: the final outputs (``get_final_output``
in workflow/rules/common.smk), the figure outputs of the plotting rules, the stages a model can run
(:func:`supported_stages`, from its adapter's capabilities), the across-papers catalogue's papers,
and the ``device`` settings that can ask for CUDA. The schema's stage enums are compared with it by
a test. Standard library only: the workflow reads it while parsing.

Paths are patterns with ``{model}`` for per-model outputs; a figure is a PNG (in the report, with
its caption ``workflow/report/<caption>.rst``) and a PDF beside it.
"""

from dataclasses import dataclass

__all__ = ["CAPABILITIES", "Figure", "Stage", "STAGES", "ANALYSES", "TOKENIZING_STAGES", "stage", "supported_stages",
           "paper_of"]

#: What a model architecture can do, as its adapter declares it (models/adapters/base.py).
CAPABILITIES = {
    "causal": "a causal decoder: its residual stream, activations and block Jacobians exist",
    "closed_form": "its single-token block Jacobian has a closed form here (else: autograd of the real block)",
    "uniform_layers": "every layer's projections have the same shapes",
    "own_attention": "every layer attends with keys and values of its own input",
    "pre_mlp_stream": "the pre-MLP residual stream of each block is recorded",
    "token_inputs": "its blocks take a per-token input besides the hidden state",
    "gated_mlp": "its MLP is gated (SwiGLU/GeGLU)",
    "parallel_block": "attention and MLP read the same input (parallel block)",
}


@dataclass(frozen=True)
class Figure:
    """One report figure: its name (output key, file name and report label), its caption file, and
    its path without extension where it is not ``results/figures/<stage>/<model or all_models>.<name>``."""

    name: str
    caption: str
    path: str = ""
    pdf: bool = True


@dataclass(frozen=True)
class Stage:
    """One stage of the workflow.

    ``models`` says which models it runs on: ``analysis`` (a per-model analysis that
    ``models.<id>.analyses`` names, behind ``<name>.activate`` except alignment), ``all`` (every model
    of the run), ``trained`` (models the workflow trains), ``gated`` (models with a gated MLP in both
    the alignment and dynamics stages) or ``none`` (a stage of its own runs, behind ``<name>.activate``
    and a non-empty ``<name>.runs``; toy_datasets: behind ``toy.datasets``). ``tables`` are per model (``{model}``), ``summaries`` once per run;
    ``figures`` per model, ``all_model_figures`` once, over all its models. ``category`` and
    ``subcategory`` (default: the model, or "all models") place its figures in the report.
    """

    name: str
    paper: str | None
    title: str
    category: str
    subcategory: str = ""
    models: str = "analysis"
    needs: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    tokenizes: bool = False
    device: bool = False
    tables: tuple[str, ...] = ()
    summaries: tuple[str, ...] = ()
    figures: tuple[Figure, ...] = ()
    all_model_figures: tuple[Figure, ...] = ()

    def figure_path(self, figure, *, all_models=False):
        """`figure`'s path without extension (``{model}`` left in for per-model figures)."""
        return figure.path or f"results/figures/{self.name}/{'all_models' if all_models else '{model}'}.{figure.name}"

    def final_outputs(self, models):
        """The files this stage adds to a run's final outputs for `models` (none when it has none); for
        a stage of its own runs (``models="none"``), `models` is whether it runs."""
        if not models:
            return []
        models = (None,) if self.models == "none" else models  # its paths name no model

        def files(figure, all_models):
            stem = self.figure_path(figure, all_models=all_models)
            return [f"{stem}.{ext}" for ext in (("png", "pdf") if figure.pdf else ("png",))]

        per_model = [*self.tables, *(f for figure in self.figures for f in files(figure, False))]
        return [
            *self.summaries,
            *(f for figure in self.all_model_figures for f in files(figure, True)),
            *(path.format(model=model) for path in per_model for model in models),
        ]


def _figures(stage, *names, captions=None):
    """Figures named `names` whose captions are ``<stage>_<name>`` unless `captions` says otherwise."""
    captions = captions or {}
    return tuple(Figure(name, captions.get(name, f"{stage}_{name}")) for name in names)


STAGES = (
    Stage("checkpoints", None, "checkpoints and their duplicate steps", "Checkpoints", models="all",
          tables=("results/checkpoints/{model}/duplicate_steps.tsv",)),
    Stage("train", None, "training the workflow's own models", "Training", models="trained",
          figures=(Figure("loss", "training_loss", path="results/figures/train/{model}.loss", pdf=False),)),
    Stage("alignment", "000", "MLP alignment across layers over training", "Alignment", device=True,
          tables=("results/alignment/{model}/cascade.tsv",),
          summaries=("results/alignment/table1.tsv",),
          figures=tuple(Figure(name, name) for name in ("adjacent_mean", "boundary_heatmap", "boundary_trajectories",
                                                        "pairwise")),
          all_model_figures=(Figure("adjacent_mean", "adjacent_mean_all_models",
                                    path="results/figures/alignment/adjacent_mean_all_models"),)),
    Stage("gated_alignment", "000", "gated MLPs' alignment with the gate", "Alignment", models="gated",
          summaries=("results/alignment/gated.tsv",)),
    Stage("coupling", "002", "block coupling of the Jacobians along the residual stream", "Coupling",
          needs=("causal", "own_attention"), tokenizes=True, device=True,
          summaries=("results/coupling/fits.tsv",),
          figures=_figures("coupling", "depthwise", "tokenwise", "over_training", "regularity", "norms", "pca",
                           "profile", "graph", "cot", "fixed_depths", "singular_values", "prompt_length"),
          all_model_figures=_figures("coupling", "over_training", "vs_score", "regularity", "sizes", "per_K", "vs_loss", "gsm8k",
                                     captions={"over_training": "coupling_over_training_all",
                                               "regularity": "coupling_regularity_models"})),
    Stage("embedding_noise", "002", "noise on the embeddings followed through the depth", "Coupling",
          needs=("causal",), tokenizes=True, device=True,
          tables=("results/embedding_noise/{model}/noise.tsv",),
          figures=_figures("embedding_noise", "first_last")),
    Stage("continuity", "003", "continuity of adjacent layers' principal singular vectors", "Continuity",
          needs=("uniform_layers",), device=True,
          summaries=("results/continuity/table2.tsv",),
          figures=_figures("continuity", "bars", "over_training", "layers", "pca")),
    Stage("toy", "003", "the toy MLP grid (symmetry breaking)", "Continuity", "Toy ablations", models="none",
          device=True, figures=tuple(Figure(name, f"toy_{name}", path=f"results/figures/toy/{name}")
                        for name in ("over_epochs", "final", "drift", "ema_alignment"))),
    Stage("toy_datasets", "003", "the toy MLP grid across image sets (gradient rank, Fig. 13)", "Continuity",
          "Toy ablations", models="none", summaries=("results/toy/datasets.tsv",),
          figures=(Figure("datasets", "toy_datasets", path="results/figures/toy/datasets"),)),
    Stage("transformer_ablations", "003", "the transformer ablations", "Continuity", "Transformer ablations",
          models="none",
          figures=(Figure("bars", "ablations_bars", path="results/figures/continuity/ablations"),
                   Figure("over_training", "ablations_over_training",
                          path="results/figures/continuity/ablations_over_training"))),
    Stage("dynamics", "004", "Jacobian spectra and their regimes", "Dynamics",
          needs=("causal",), tokenizes=True, device=True,
          tables=("results/dynamics/{model}/regimes.tsv", "results/dynamics/{model}/radius_vs_rank_drop.tsv",
                  "results/dynamics/{model}/bottleneck.tsv"),
          summaries=("results/dynamics/schur_recovery.tsv",),
          figures=_figures("dynamics", "operators", "sample_spectra", "eigenvalues", "cumulative_rank", "regimes",
                           "eigenvalue_density"),
          all_model_figures=_figures("dynamics", "schur_models")),
    Stage("topology", "004", "communities of units, the boundary-node and rate-level tests", "Topology",
          needs=("causal", "pre_mlp_stream"), after=("dynamics",), tokenizes=True,
          summaries=("results/topology/method_comparison.tsv",),
          figures=_figures("topology", "communities", "boundary_coupling", "mesoscale", "rate_coupling",
                           "unit_coupling", captions={"boundary_coupling": "topology_boundary",
                                                      "rate_coupling": "topology_rate"}),
          all_model_figures=_figures("topology", "alignment_vs_boundary")),
    Stage("across_papers", None, "every paper's adjacent-layer measures side by side", "Across papers",
          models="all",
          tables=("results/across_papers/{model}/emergence_order.tsv",),
          figures=_figures("across_papers", "profiles", "correlations", "emergence",
                           captions={name: f"across_{name}" for name in ("profiles", "correlations", "emergence")}),
          all_model_figures=(Figure("baseline_ratios", "across_baseline_ratios"),)),
    Stage("evaluation", None, "held-out loss of every checkpoint", "Evaluation", models="all", device=True,
          tables=("results/evaluation/{model}/heldout.tsv",)),
    Stage("benchmarks", None, "benchmark scores with lm-evaluation-harness", "Evaluation", models="all", device=True,
          tables=("results/evaluation/{model}/scores.tsv",)),
    Stage("claims", None, "each paper's findings as verdicts per claim and model", "Claims", models="all",
          summaries=("results/claims/claims.tsv", "results/claims/published.tsv", "results/claims/report.rst"),
          all_model_figures=(Figure("verdicts", "claims_verdicts", path="results/figures/claims/verdicts"),)),
)

_BY_NAME = {s.name: s for s in STAGES}

#: The per-model analyses (``models.<id>.analyses``), in alphabetical order (the schema's enum).
ANALYSES = tuple(sorted(s.name for s in STAGES if s.models == "analysis"))
#: The analyses whose jobs tokenize text with the checkpoint's own tokenizer (topology reads the
#: dynamics stage's activations).
TOKENIZING_STAGES = tuple(s.name for s in STAGES if s.tokenizes)


def stage(name):
    """The :class:`Stage` called `name`."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"no stage {name!r}: the stages are {list(_BY_NAME)}") from None


def paper_of(name):
    """The paper (``"000"``...) of stage `name`."""
    return stage(name).paper


def supported_stages(capabilities):
    """The analyses a model with `capabilities` (a set of :data:`CAPABILITIES` names) can run, in order,
    and for each other analysis the capabilities it lacks: ``(supported, {analysis: missing})``."""
    capabilities = set(capabilities)
    unknown = capabilities - set(CAPABILITIES)
    if unknown:
        raise ValueError(f"unknown capabilities {sorted(unknown)}: known are {sorted(CAPABILITIES)}")
    missing = {name: [c for c in stage(name).needs if c not in capabilities] for name in ANALYSES}
    return tuple(name for name, lack in missing.items() if not lack), {n: m for n, m in missing.items() if m}
