# The four papers' adjacent-layer measures side by side: per model, one row per checkpoint and
# layer boundary from the per-paper results -> correlations along depth and emergence over
# training -> across models -> figures. A measure whose analysis a model lacks is an empty column.


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
        library=library_digest("across_papers.py"),
    script:
        "../scripts/across_papers.py"


rule across_papers_models:
    input:
        boundaries=expand("results/across_papers/{model}/boundaries.tsv", model=MODELS),
        measures=expand("results/across_papers/{model}/measures.tsv", model=MODELS),
        heldout=expand("results/evaluation/{model}/heldout.tsv", model=MODELS)
        if config["evaluation"]["activate"] else [],
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
        library=library_digest("across_papers_models.py"),
    script:
        "../scripts/across_papers_models.py"


rule plot_across_papers:
    input:
        boundaries=rules.across_papers.output.boundaries,
        measures=rules.across_papers.output.measures,
        correlations=rules.across_papers.output.correlations,
        emergence=rules.across_papers.output.emergence,
    output:
        **figure_outputs("across_papers"),
    log:
        "logs/plot_across_papers/{model}.log",
    benchmark:
        "benchmarks/plot_across_papers/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        steps=get_model_steps,
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_across_papers.py"),
    script:
        "../scripts/plot_across_papers.py"


rule plot_across_papers_models:
    input:
        models=rules.across_papers_models.output.models,
        measures=expand("results/across_papers/{model}/measures.tsv", model=MODELS),
    output:
        **figure_outputs("across_papers", all_models=True),
    log:
        "logs/plot_across_papers_models.log",
    benchmark:
        "benchmarks/plot_across_papers_models.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_across_papers_models.py"),
    script:
        "../scripts/plot_across_papers_models.py"
