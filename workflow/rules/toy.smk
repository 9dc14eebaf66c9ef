# The toy residual-MLP ablations of paper 003 (section 4) on real MNIST: one job per run, its seeds in
# turn, or batched on cuda (one process per seed would spend much of its time starting).
TOY = config["toy"]
TOY_RUNS = list(TOY["runs"])
# Fig. 13: toy.datasets.runs again on other image sets, under results/toy/<set>/ (MNIST first; none: no figure)
TOY_IMAGE_SETS = cfg.toy_image_sets(config)


wildcard_constraints:
    run=one_of(TOY_RUNS),
    image_set=one_of(TOY_IMAGE_SETS[1:]),


# A localrule: torchvision downloads on the submit host (compute nodes often have no internet);
# set in the rule, so that it holds under a module's renamed rules, e.g. crosslayer_*.
rule prepare_mnist:
    output:
        npz="results/toy/mnist.npz",
    log:
        "logs/prepare_mnist.log",
    benchmark:
        "benchmarks/prepare_mnist.tsv"
    localrule: True
    conda:
        "../../envs/toy.yaml"
    params:
        data=cfg.mnist_params(TOY["data"]),
        library=library_digest("prepare_mnist.py"),
    script:
        "../scripts/prepare_mnist.py"


rule train_toy:
    input:
        data=rules.prepare_mnist.output.npz,
    output:
        epochs=expand("results/toy/{{run}}/seed{seed}.epochs.tsv", seed=TOY["seeds"]),
        status=expand("results/toy/{{run}}/seed{seed}.status.json", seed=TOY["seeds"]),
    log:
        "logs/train_toy/{run}.log",
    benchmark:
        "benchmarks/train_toy/{run}.tsv"
    conda:
        "../../envs/toy.yaml"
    threads: TOY["threads"]
    resources:
        gpu=get_gpu_request(TOY["device"]),
    params:  # toy.device is read from the config: speed and rounding only, it re-runs nothing
        settings=get_toy_settings,
        seeds=TOY["seeds"],
        erank_power=TOY["erank_power"],
        library=library_digest("train_toy.py"),
    script:
        "../scripts/train_toy.py"


# Like prepare_mnist: torchvision downloads on the submit host, then the arrays are read from its files.
rule prepare_toy_dataset:
    output:
        npz="results/toy/{image_set}.npz",
    log:
        "logs/prepare_toy_dataset/{image_set}.log",
    benchmark:
        "benchmarks/prepare_toy_dataset/{image_set}.tsv"
    localrule: True
    conda:
        "../../envs/toy.yaml"
    params:
        directory=TOY["datasets"]["directory"],
        library=library_digest("prepare_toy_dataset.py"),
    script:
        "../scripts/prepare_toy_dataset.py"


# The same training on another image set: input width and class count follow its arrays.
use rule train_toy as train_toy_dataset with:
    input:
        data=rules.prepare_toy_dataset.output.npz,
    output:
        epochs=expand("results/toy/{{image_set}}/{{run}}/seed{seed}.epochs.tsv", seed=TOY["seeds"]),
        status=expand("results/toy/{{image_set}}/{{run}}/seed{seed}.status.json", seed=TOY["seeds"]),
    log:
        "logs/train_toy/{image_set}/{run}.log",
    benchmark:
        "benchmarks/train_toy/{image_set}/{run}.tsv"


rule summarize_toy:
    input:
        epochs=expand("results/toy/{run}/seed{seed}.epochs.tsv", run=TOY_RUNS, seed=TOY["seeds"]),
        status=expand("results/toy/{run}/seed{seed}.status.json", run=TOY_RUNS, seed=TOY["seeds"]),
    output:
        final=report(
            "results/toy/final.tsv",
            caption="../report/toy_table.rst",
            category="Continuity",
            subcategory="Toy ablations",
            labels={"table": "toy ablations (Tables 1, 3-5)"},
        ),
        epochs="results/toy/epochs.tsv",
    log:
        "logs/summarize_toy.log",
    benchmark:
        "benchmarks/summarize_toy.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        runs=TOY_RUNS,
        seeds=TOY["seeds"],
        library=library_digest("summarize_toy.py"),
    script:
        "../scripts/summarize_toy.py"


rule plot_toy:
    input:
        epochs=rules.summarize_toy.output.epochs,
        final=rules.summarize_toy.output.final,
    output:
        **figure_outputs("toy"),
    log:
        "logs/plot_toy.log",
    benchmark:
        "benchmarks/plot_toy.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        runs=TOY_RUNS,
        drift_runs=TOY["drift_runs"],
        ema_run=TOY["ema_run"],
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_toy.py"),
    script:
        "../scripts/plot_toy.py"


rule summarize_toy_datasets:
    input:
        epochs=get_toy_dataset_files("epochs.tsv"),
        status=get_toy_dataset_files("status.json"),
    output:
        table=report(
            "results/toy/datasets.tsv",
            caption="../report/toy_datasets_table.rst",
            category="Continuity",
            subcategory="Toy ablations",
            labels={"table": "toy runs across image sets (Fig. 13)"},
        ),
    log:
        "logs/summarize_toy_datasets.log",
    benchmark:
        "benchmarks/summarize_toy_datasets.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        image_sets=TOY_IMAGE_SETS,
        runs=TOY["datasets"]["runs"],
        seeds=TOY["seeds"],
        library=library_digest("summarize_toy_datasets.py"),
    script:
        "../scripts/summarize_toy_datasets.py"


rule plot_toy_datasets:
    input:
        table=rules.summarize_toy_datasets.output.table,
    output:
        **figure_outputs("toy_datasets"),
    log:
        "logs/plot_toy_datasets.log",
    benchmark:
        "benchmarks/plot_toy_datasets.tsv"
    conda:
        "../../envs/plots.yaml"
    params:
        image_sets=TOY_IMAGE_SETS,
        runs=TOY["datasets"]["runs"],
        dpi=config["plots"]["dpi"],
        library=library_digest("plot_toy_datasets.py"),
    script:
        "../scripts/plot_toy_datasets.py"
