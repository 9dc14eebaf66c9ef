# Each paper's headline findings tested on the run's own tables (crosslayer/claims): one verdict
# per claim and model or group of models, the published numbers beside ours, the verdict matrix,
# and the report's first page (the Snakefile's `report:` points to it once it exists).


rule claims:
    input:
        tables=get_claims_inputs,
        description=get_report_description(),  # the workflow's report text, below the verdicts
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
        identities=lambda wildcards: claims_identities(),
        settings=config["claims"],
        dpi=config["plots"]["dpi"],
        library=library_digest("claims.py"),
    script:
        "../scripts/claims.py"
