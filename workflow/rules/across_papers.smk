# The four papers' adjacent-layer measures side by side: per model, one row per checkpoint and
# layer boundary from the per-paper results -> correlations along depth and emergence over
# training -> across models -> figures. A measure whose analysis a model lacks is an empty column.
ACROSS = cfg.across_papers_settings(config) if config["across_papers"]["activate"] else {}


def across_analyses(model):
    """The measure families `model` has results for, in the order of across_papers.measures."""
    return [a for a in ACROSS["measures"] if model in models_for(a)]


def get_across_analyses(wildcards):
    return across_analyses(wildcards.model)


def get_across_papers_inputs(wildcards):
    """Every per-paper result the model's boundary table reads; the spectra also give the regimes."""
    model, analyses = wildcards.model, across_analyses(wildcards.model)

    def per_step(pattern):
        return expand(pattern, model=model, step=get_steps(model))

    inputs = {}
    if "alignment" in analyses:
        inputs |= {"adjacent": rules.summarize_alignment.output.adjacent.format(model=model),
                   "alignment_baseline": rules.summarize_alignment.output.baseline.format(model=model)}
    if "continuity" in analyses:
        inputs |= {"continuity_npz": per_step(rules.projection_continuity.output.npz),
                   "continuity_tables": per_step(rules.projection_continuity.output.table)}
    if "coupling" in analyses:
        inputs["depthwise"] = f"results/coupling/{model}/depthwise.tsv"
    if model in models_for("dynamics"):
        inputs["spectra"] = per_step(rules.jacobian_spectra.output.table)
    if "topology" in analyses:
        inputs["partitions"] = per_step(rules.detect_communities.output.partitions)
    return inputs


rule across_papers:
    input:
        unpack(get_across_papers_inputs),
    output:
        boundaries=report(
            "results/across_papers/{model}/boundaries.tsv",
            caption="../report/across_boundaries.rst",
            category="Across papers",
            subcategory="{model}",
            labels={"model": "{model}", "table": "boundaries"},
        ),
        measures="results/across_papers/{model}/measures.tsv",
        correlations="results/across_papers/{model}/correlations.tsv",
        emergence="results/across_papers/{model}/emergence.tsv",
        emergence_order=report(
            "results/across_papers/{model}/emergence_order.tsv",
            caption="../report/across_emergence_order.rst",
            category="Across papers",
            subcategory="{model}",
            labels={"model": "{model}", "table": "emergence order"},
        ),
    log:
        "logs/across_papers/{model}.log",
    benchmark:
        "benchmarks/across_papers/{model}.tsv"
    conda:
        "../../envs/topology.yaml"  # the NMI baseline uses the community statistics
    params:
        steps=get_model_steps,
        analyses=get_across_analyses,
        settings=ACROSS,
        metric=config["coupling"]["metric"],
    script:
        "../scripts/across_papers.py"


rule across_papers_models:
    input:
        boundaries=expand("results/across_papers/{model}/boundaries.tsv", model=MODELS),
        measures=expand("results/across_papers/{model}/measures.tsv", model=MODELS),
    output:
        models=report(
            "results/across_papers/models.tsv",
            caption="../report/across_models.rst",
            category="Across papers",
            subcategory="all models",
            labels={"table": "baseline ratios per model"},
        ),
    log:
        "logs/across_papers_models.log",
    benchmark:
        "benchmarks/across_papers_models.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        models=list(MODELS),
    script:
        "../scripts/across_papers_models.py"


rule plot_across_papers:
    input:
        boundaries=rules.across_papers.output.boundaries,
        measures=rules.across_papers.output.measures,
        correlations=rules.across_papers.output.correlations,
        emergence=rules.across_papers.output.emergence,
    output:
        profiles=figure("across_papers", "profiles", "across_profiles", category="Across papers"),
        correlations=figure("across_papers", "correlations", "across_correlations", category="Across papers"),
        emergence=figure("across_papers", "emergence", "across_emergence", category="Across papers"),
        pdfs=expand("results/figures/across_papers/{{model}}.{name}.pdf", name=ACROSS_FIGURES),
    log:
        "logs/plot_across_papers/{model}.log",
    benchmark:
        "benchmarks/plot_across_papers/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        steps=get_model_steps,
        dpi=config["plots"]["dpi"],
    script:
        "../scripts/plot_across_papers.py"


rule plot_across_papers_models:
    input:
        models=rules.across_papers_models.output.models,
        measures=expand("results/across_papers/{model}/measures.tsv", model=MODELS),
    output:
        png=figure(
            "across_papers",
            "baseline_ratios",
            "across_baseline_ratios",
            model="all_models",
            category="Across papers",
        ),
        pdf="results/figures/across_papers/all_models.baseline_ratios.pdf",
    log:
        "logs/plot_across_papers_models.log",
    benchmark:
        "benchmarks/plot_across_papers_models.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        dpi=config["plots"]["dpi"],
    script:
        "../scripts/plot_across_papers_models.py"
