# How well each checkpoint models language: a fixed held-out text set -> per checkpoint loss,
# perplexity and bits per byte -> per model over training. The performance axis of paper 002's
# generalization fits where no benchmark scores are given.
EVALUATION = config["evaluation"]
HELDOUT = EVALUATION["heldout"]


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
    script:
        "../scripts/summarize_heldout.py"
