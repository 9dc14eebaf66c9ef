# Residual-stream topology (paper 004, section 3): activation-correlation graphs -> communities
# -> statistics tying them to the Jacobians -> tables and figures.
TOPOLOGY = config["topology"]


rule correlation_graphs:
    input:
        activations=rules.block_jacobians.output.activations,
    output:
        graphs=directory("results/topology/{model}/step{step}.graphs"),
    log:
        "logs/correlation_graphs/{model}/step{step}.log",
    benchmark:
        "benchmarks/correlation_graphs/{model}/step{step}.tsv"
    conda:
        "../../envs/topology.yaml"
    params:
        k=TOPOLOGY["k"],
        library=library_digest("correlation_graphs.py"),
    script:
        "../scripts/correlation_graphs.py"


rule detect_communities:
    input:
        graphs=rules.correlation_graphs.output.graphs,
    output:
        partitions="results/topology/{model}/step{step}.partitions.npz",
        table="results/topology/{model}/step{step}.communities.tsv",
    log:
        "logs/detect_communities/{model}/step{step}.log",
    benchmark:
        "benchmarks/detect_communities/{model}/step{step}.tsv"
    conda:
        "../../envs/topology.yaml"
    params:
        methods=TOPOLOGY["methods"],
        seeds=TOPOLOGY["seeds"],
        resolution_pos=TOPOLOGY["resolution_pos"],
        resolution_neg=TOPOLOGY["resolution_neg"],
        rb_resolution_pos=TOPOLOGY["rb_resolution_pos"],
        rb_resolution_neg=TOPOLOGY["rb_resolution_neg"],
        library=library_digest("detect_communities.py"),
    script:
        "../scripts/detect_communities.py"


rule topology_statistics:
    input:
        partitions=rules.detect_communities.output.partitions,
        jacobians=rules.block_jacobians.output.npz,
        spectra=rules.jacobian_spectra.output.table,
    output:
        layers="results/topology/{model}/step{step}.coupling.tsv",
        summary="results/topology/{model}/step{step}.summary.tsv",
    log:
        "logs/topology_statistics/{model}/step{step}.log",
    benchmark:
        "benchmarks/topology_statistics/{model}/step{step}.tsv"
    conda:
        "../../envs/topology.yaml"
    params:
        random_partitions=TOPOLOGY["random_partitions"],
        tail=TOPOLOGY["tail"],
        permutations=TOPOLOGY["permutations"],
        rate_permutations=TOPOLOGY["rate_permutations"],
        fdr_q=TOPOLOGY["fdr_q"],
        seed=TOPOLOGY["seed"],
        library=library_digest("topology_statistics.py"),
    script:
        "../scripts/topology_statistics.py"


rule topology_tables:
    input:
        summaries=[path for _, _, path in topology_files("summary")],
    output:
        summary=report(
            "results/topology/summary.tsv",
            caption="../report/topology_summary.rst",
            category="Topology",
            labels={"table": "boundary-node and rate-level tests, summary"},
        ),
        comparison=report(
            "results/topology/method_comparison.tsv",
            caption="../report/method_comparison.rst",
            category="Topology",
            labels={"table": "method comparison"},
        ),
    log:
        "logs/topology_tables.log",
    benchmark:
        "benchmarks/topology_tables.tsv"
    conda:
        "../../envs/topology.yaml"
    params:
        models=[model for model, _, _ in topology_files("summary")],
        steps=[step for _, step, _ in topology_files("summary")],
        library=library_digest("topology_tables.py"),
    script:
        "../scripts/topology_tables.py"


rule plot_topology:
    input:
        communities=every_step("results/topology/{model}/step{step}.communities.tsv"),
        layers=every_step("results/topology/{model}/step{step}.coupling.tsv"),
        summaries=every_step("results/topology/{model}/step{step}.summary.tsv"),
        partitions=every_step("results/topology/{model}/step{step}.partitions.npz"),
        jacobians=every_step("results/dynamics/{model}/step{step}.jacobians.npz"),
    output:
        **figure_outputs("topology"),
    log:
        "logs/plot_topology/{model}.log",
    benchmark:
        "benchmarks/plot_topology/{model}.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        steps=get_model_steps,
        method=TOPOLOGY["methods"][0],
        fdr_q=TOPOLOGY["fdr_q"],
        tail=TOPOLOGY["tail"],
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_topology.py"),
    script:
        "../scripts/plot_topology.py"


rule plot_alignment_vs_boundary:
    input:
        summary=rules.topology_tables.output.summary,
        layers=[path for _, _, path in topology_files("coupling")],
    output:
        **figure_outputs("topology", all_models=True),
    log:
        "logs/plot_alignment_vs_boundary.log",
    benchmark:
        "benchmarks/plot_alignment_vs_boundary.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        models=[model for model, _, _ in topology_files("coupling")],
        steps=[step for _, step, _ in topology_files("coupling")],
        method=TOPOLOGY["methods"][0],
        permutations=TOPOLOGY["rate_permutations"],
        seed=TOPOLOGY["seed"],
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_alignment_vs_boundary.py"),
    script:
        "../scripts/plot_alignment_vs_boundary.py"
