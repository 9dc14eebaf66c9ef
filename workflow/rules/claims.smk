# Each paper's headline findings tested on the run's own tables (crosslayer/claims): one verdict
# per claim and model or group of models, the published numbers beside ours, the verdict matrix,
# and the report's first page (the Snakefile's `report:` points to it once it exists).


def claims_tables():
    """The papers judged (those with a stage in this run) and, for each table their catalogues
    read, the models whose stage writes it with their steps: {table: {model: steps}}. A stage of
    its own runs (toy, transformer_ablations) is one pseudo-model named after it, without steps."""
    from crosslayer.claims.catalogue import catalogue_papers, load_catalogue
    from crosslayer.claims.readers import reader

    papers = [p for p in catalogue_papers() if any(stage_models(s) for s in STAGES if s.paper == p)]
    tables = {}
    for paper in papers:
        for name in load_catalogue(paper).tables:
            stage_ = stage(reader(name).stage)
            runs = stage_models(stage_)
            if stage_.models == "none":
                tables[name] = {stage_.name: []} if runs else {}
            else:
                tables[name] = {model: get_steps(model) for model in runs}
    return papers, tables


def get_claims_inputs(wildcards):
    from crosslayer.claims.readers import files_of

    _, tables = claims_tables()
    return sorted(set(files_of(tables, tables)))


rule claims:
    input:
        tables=get_claims_inputs,
        description=str(Path(workflow.basedir) / "workflow" / "report" / "workflow.rst"),
    output:
        table=report(
            "results/claims/claims.tsv",
            caption="../report/claims_table.rst",
            category="Claims",
            subcategory="all models",
            labels={"table": "verdicts"},
        ),
        published=report(
            "results/claims/published.tsv",
            caption="../report/claims_published.rst",
            category="Claims",
            subcategory="all models",
            labels={"table": "published numbers beside ours"},
        ),
        report_text="results/claims/report.rst",
        **figure_outputs("claims", all_models=True),
    log:
        "logs/claims.log",
    benchmark:
        "benchmarks/claims.tsv"
    conda:
        "../../envs/claims.yaml"
    params:
        run=lambda wildcards: claims_tables(),
        settings=config["claims"],
        dpi=config["plots"]["dpi"],
    script:
        "../scripts/claims.py"
