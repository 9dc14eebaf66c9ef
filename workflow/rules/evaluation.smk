# How well each checkpoint models language: a fixed held-out text set -> per checkpoint loss,
# perplexity and bits per byte -> per model over training; optionally benchmark scores with
# lm-evaluation-harness. The performance axis of paper 002's generalization fits.
EVALUATION = config["evaluation"]
HELDOUT = EVALUATION["heldout"]
BENCHMARKS = config["benchmarks"]


# Hub datasets need the internet, so the text set is prepared where Snakemake runs, never on a node.
rule prepare_heldout:
    input:
        **({"tokenizer": rules.prepare_corpus.output.tokenizer, "tokens": rules.prepare_corpus.output.tokens}
           if HELDOUT["source"] == "corpus" else {}),
    output:
        texts="results/evaluation/heldout.jsonl",
    log:
        "logs/prepare_heldout.log",
    benchmark:
        "benchmarks/prepare_heldout.tsv"
    localrule: True
    conda:
        "../../envs/samples.yaml"
    params:
        heldout=cfg.heldout_params(HELDOUT),
        library=library_digest("prepare_heldout.py"),
    script:
        "../scripts/prepare_heldout.py"


rule heldout_loss:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
        texts=rules.prepare_heldout.output.texts,
    output:
        json="results/evaluation/{model}/step{step}.heldout.json",
    log:
        "logs/heldout_loss/{model}/step{step}.log",
    benchmark:
        "benchmarks/heldout_loss/{model}/step{step}.tsv"
    conda:
        "../../envs/dynamics.yaml"
    threads: EVALUATION["threads"]
    resources:
        gpu=get_gpu_request(EVALUATION["device"]),
    params:
        context=HELDOUT["context"],
        max_windows=HELDOUT["max_windows"],
        library=library_digest("heldout_loss.py"),
    script:
        "../scripts/heldout_loss.py"


rule summarize_heldout:
    input:
        json=every_step("results/evaluation/{model}/step{step}.heldout.json"),
    output:
        table=report(
            "results/evaluation/{model}/heldout.tsv",
            caption="../report/evaluation_heldout.rst",
            category="Evaluation",
            subcategory="{model}",
            labels={"model": "{model}", "table": "held-out loss"},
        ),
    log:
        "logs/summarize_heldout/{model}.log",
    benchmark:
        "benchmarks/summarize_heldout/{model}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        steps=get_model_steps,
        library=library_digest("summarize_heldout.py"),
    script:
        "../scripts/summarize_heldout.py"


# The harness downloads each task's dataset on first use: here, where Snakemake runs, into the
# Hugging Face cache that the scoring jobs then read (share HF_HOME with the nodes on a cluster).
rule prepare_benchmarks:
    input:
        tasks=BENCHMARKS["include_path"] or [],
    output:
        tasks="results/evaluation/benchmark_tasks.json",
    log:
        "logs/prepare_benchmarks.log",
    benchmark:
        "benchmarks/prepare_benchmarks.tsv"
    localrule: True
    conda:
        "../../envs/evaluate.yaml"
    params:
        tasks=BENCHMARKS["tasks"],
        builtin=BENCHMARKS["builtin"],
        library=library_digest("prepare_benchmarks.py"),
    script:
        "../scripts/prepare_benchmarks.py"


rule evaluate:
    input:
        manifest="results/checkpoints/{model}/step{step}.json",
        fetched=rules.prepare_benchmarks.output.tasks,
        tasks=BENCHMARKS["include_path"] or [],
    output:
        table=report(
            "results/evaluation/{model}/step{step}.tsv",
            caption="../report/evaluation_scores.rst",
            category="Evaluation",
            subcategory="{model}",
            labels={"model": "{model}", "step": "{step}", "table": "benchmark scores"},
        ),
    log:
        "logs/evaluate/{model}/step{step}.log",
    benchmark:
        "benchmarks/evaluate/{model}/step{step}.tsv"
    conda:
        "../../envs/evaluate.yaml"
    threads: BENCHMARKS["threads"]
    resources:
        gpu=get_gpu_request(BENCHMARKS["device"]),
    params:
        tasks=BENCHMARKS["tasks"],
        limit=BENCHMARKS["limit"],
        builtin=BENCHMARKS["builtin"],
        dtype=BENCHMARKS["dtype"],
        library=library_digest("evaluate.py"),
    script:
        "../scripts/evaluate.py"


rule summarize_scores:
    input:
        tables=get_scored_steps("results/evaluation/{model}/step{step}.tsv"),
    output:
        table=report(
            "results/evaluation/{model}/scores.tsv",
            caption="../report/evaluation_scores_model.rst",
            category="Evaluation",
            subcategory="{model}",
            labels={"model": "{model}", "table": "benchmark scores"},
        ),
    log:
        "logs/summarize_scores/{model}.log",
    benchmark:
        "benchmarks/summarize_scores/{model}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        steps=lambda wildcards: scored_steps(wildcards.model),
        library=library_digest("summarize_scores.py"),
    script:
        "../scripts/summarize_scores.py"
