"""A user's own checkpoints through config/overlays/own_models.yaml (README, "Your own model"): one
final checkpoint (`source: local`, a single step), every analysis and each analysis alone, and two
models of which only one takes some analyses. Each run must finish (exit 0) with no traceback and
no Python warning in its console or job logs but the library's own data warnings, and write the
final outputs of the stages its models take, and none of the others. One run holds a final
checkpoint with every analysis and four models with one analysis each; the plan of each analysis
alone must hold no job of another stage.

The checkpoints are real: those the reduced pipeline trained and saved with save_pretrained and
their tokenizer (conftest.tiny_run), copied out as a user's checkpoint directories. The runs overlay
tiny.yaml's sizes on config/config.yaml (seconds per run, not minutes)."""

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from plans import planned
from snakemake_runs import ROOT, TINY, snakemake

pytestmark = pytest.mark.workflow

OWN = ROOT / "config" / "overlays" / "own_models.yaml"

#: The library's warning for usable but degenerate data (a single community in a tiny model, ...):
#: a result, not a fault of the code. Any other Python warning in a log is.
DATA_WARNINGS = {"DegenerateInputWarning"}


def final_outputs(model, analysis):
    """What a run asks for, per model and analysis (Snakefile: rule all), as files under results/."""
    figures = {
        "alignment": ["adjacent_mean", "boundary_heatmap", "boundary_trajectories", "pairwise"],
        "continuity": ["bars", "over_training", "layers", "pca"],
        "coupling": ["depthwise", "tokenwise", "over_training", "regularity", "norms", "pca", "profile", "graph",
                     "cot", "fixed_depths", "singular_values", "prompt_length"],
        "dynamics": ["operators", "sample_spectra", "eigenvalues", "cumulative_rank", "regimes",
                     "eigenvalue_density"],
        "topology": ["communities", "boundary_coupling", "mesoscale", "rate_coupling", "unit_coupling"],
        "embedding_noise": ["first_last"],
    }[analysis]
    tables = {
        "alignment": ["alignment/table1.tsv", "alignment/cascade_fit.tsv", f"alignment/{model}/cascade.tsv"],
        "continuity": ["continuity/table2.tsv"],
        "coupling": ["coupling/fits.tsv"],
        "dynamics": [f"dynamics/{model}/regimes.tsv", f"dynamics/{model}/radius_vs_rank_drop.tsv"],
        "topology": ["topology/method_comparison.tsv"],
        "embedding_noise": [f"embedding_noise/{model}/noise.tsv"],
    }[analysis]
    across_models = {
        "alignment": ["adjacent_mean_all_models"],
        "coupling": ["all_models.over_training", "all_models.vs_score"],
        "topology": ["all_models.alignment_vs_boundary"],
    }.get(analysis, [])
    return [*tables, *(f"figures/{analysis}/{model}.{f}.{ext}" for f in figures for ext in ("png", "pdf")),
            *(f"figures/{analysis}/{f}.{ext}" for f in across_models for ext in ("png", "pdf"))]


def always(model):
    """Every run's outputs for every model: the duplicate-step check and the across-papers stage."""
    return [f"checkpoints/{model}/duplicate_steps.tsv", f"across_papers/{model}/emergence_order.tsv",
            "across_papers/models.tsv", "figures/across_papers/all_models.baseline_ratios.png",
            *(f"figures/across_papers/{model}.{f}.{ext}" for f in ("profiles", "correlations", "emergence")
              for ext in ("png", "pdf"))]


@pytest.fixture(scope="module")
def checkpoints(tiny_run, tmp_path_factory):
    """Two real checkpoint directories as a user brings them (config.json, model.safetensors,
    tokenizer): the GPT-NeoX (GELU MLP) and the Llama (gated SwiGLU MLP) model the reduced pipeline
    trained (conftest.tiny_run), their step 16 copied out of its results/train."""
    work = tmp_path_factory.mktemp("own_checkpoints")
    out = {}
    for name, trained in (("gelu", "tiny-gelu"), ("swiglu", "tiny-swiglu")):
        out[name] = work / name
        shutil.copytree(tiny_run / f"results/train/{trained}/step16", out[name])
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out[name].iterdir()}
    return out


def own_models(workdir, models):
    """The config files of a user's run: config/config.yaml, tiny sizes, and a copy of
    own_models.yaml whose models (run_models: all of them) are `models` instead of its example."""
    sizes = yaml.safe_load(TINY.read_text())
    for key in ("models", "toy", "transformer_ablations", "train"):  # own_models.yaml: no training, no ablations
        sizes.pop(key)
    sizes["across_papers"] = {"Ks": None}  # coupling.Ks of the tiny sizes (config.yaml's 10 > d = 32)
    sizes["embedding_noise"] = {"activate": True, "levels": [0.1, 1.0], "draws": 1}  # off in config.yaml
    sizes["coupling"].update(wikitext_prompts(workdir))
    own = yaml.safe_load(OWN.read_text())
    assert list(own["models"]) == own["run_models"] == ["my-model"]  # the example this test replaces
    own["models"], own["run_models"] = models, list(models)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "sizes.yaml").write_text(yaml.safe_dump(sizes))
    (workdir / "my_models.yaml").write_text(yaml.safe_dump(own))
    return [str(ROOT / "config" / "config.yaml"), str(workdir / "sizes.yaml"), str(workdir / "my_models.yaml")]


def wikitext_prompts(workdir):
    """A local dataset shaped as WikiText-2 (blank rows, headings, paragraphs) measured for the figures
    by depth but not pooled, as the coupling suite's 100 WikiText-2 prompts of Fig. 26."""
    rows = [text for i in range(6) for text in ("", f" = Heading {i} = \n", f"Paragraph {i} of the local text , " * 5)]
    (workdir / "wikitext").mkdir(parents=True, exist_ok=True)
    (workdir / "wikitext/test.jsonl").write_text("".join(json.dumps({"text": row}) + "\n" for row in rows))
    dataset = {"label": "wikitext", "path": str(workdir / "wikitext"), "split": "test", "field": "text", "n": 3,
               "seed": 0, "min_words": 20, "pooled": False, "cache_dir": str(workdir / "datasets_cache")}
    tiny = yaml.safe_load(TINY.read_text())["coupling"]
    return {"prompts": {**tiny["prompts"], "datasets": [dataset]}, "regularity_source": "wikitext"}


def local(path, step, analyses=None):
    return {"source": "local", "checkpoints": {step: str(path)}, **({"analyses": analyses} if analyses else {})}


def problems(text):
    """Python tracebacks and warnings (other than DATA_WARNINGS) in a console or log text."""
    found = ["Traceback" for _ in re.finditer(r"^Traceback \(most recent call last\)", text, re.M)]
    found += [m[0] for m in re.finditer(r"\b(\w+Warning): .*", text) if m[1] not in DATA_WARNINGS]
    return found


def run(workdir, models):
    """Run the whole workflow on `models`; assert it finished cleanly; return the results folder."""
    result = snakemake(workdir, "--cores", "2", "--configfile", *own_models(workdir, models), check=False,
                       timeout=600, env={"HF_DATASETS_OFFLINE": "1"})
    console = result.output
    assert result.returncode == 0, console[-6000:]
    found = {"console": problems(console)}
    found |= {str(log.relative_to(workdir)): problems(log.read_text()) for log in (workdir / "logs").rglob("*.log")}
    assert not {where: what for where, what in found.items() if what}
    return workdir / "results"


def assert_present(results, paths):
    missing = [p for p in paths if not (results / p).is_file() or (results / p).stat().st_size == 0]
    assert not missing


STAGES = ["alignment", "continuity", "coupling", "dynamics", "embedding_noise", "topology"]


ALONE = ["alignment", "continuity", "coupling", "dynamics", "embedding_noise"]  # topology needs dynamics (below)
RUN_ALONE = ALONE[:4]


def stage_rules():
    """stage -> the rules of workflow/rules/<stage>.smk (the analyses' stages and their shared ones)."""
    return {smk.stem: set(re.findall(r"^rule (\w+):", smk.read_text(), re.M))
            for smk in (ROOT / "workflow" / "rules").glob("*.smk")}


@pytest.mark.parametrize("analysis", ALONE)
def test_each_analysis_alone_plans_no_job_of_another_stage(checkpoints, tmp_path, analysis):
    # the all-model tables of a stage no model takes had no input and crashed (issue 39)
    jobs = planned(tmp_path, *own_models(tmp_path, {"my-model": local(checkpoints["gelu"], 1000, [analysis])}))
    rules = stage_rules()
    allowed = rules[analysis] | rules["checkpoints"] | rules["evaluation"] | rules["across_papers"] | rules["claims"]
    allowed |= {"prepare_prompts"} if analysis == "embedding_noise" else set()  # the coupling stage's prompts
    assert jobs and set(jobs) <= allowed, sorted(set(jobs) - allowed)


def test_topology_alone_is_refused_before_any_job_naming_the_key(checkpoints, tmp_path):
    # it reads the dynamics stage's Jacobians; with them it runs in the tests above and below
    result = snakemake(tmp_path, "-n", "--configfile",
                       *own_models(tmp_path, {"my-model": local(checkpoints["gelu"], 1000, ["topology"])}),
                       check=False, timeout=300)
    assert result.returncode != 0
    assert "models.my-model.analyses: topology needs dynamics" in result.output
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()


def test_a_final_checkpoint_with_every_analysis_beside_models_with_one_each(checkpoints, tmp_path):
    # One run: the most common thing a user brings, the final checkpoint alone, here labelled step 0
    # (no emergence after step 0 to draw), with every analysis (a Llama: the gate-conditioned
    # alignment runs too); beside it one model per analysis, each alone, one checkpoint at step 1000.
    # (embedding_noise alone: its plan above is enough; the full model runs it)
    alone = {f"only-{analysis}": local(checkpoints["gelu"], 1000, [analysis]) for analysis in RUN_ALONE}
    results = run(tmp_path, {"full": local(checkpoints["swiglu"], 0), **alone})
    assert_present(results, [*always("full"), "alignment/gated.tsv",
                             *(p for stage in STAGES for p in final_outputs("full", stage))])
    for analysis in RUN_ALONE:
        model = f"only-{analysis}"
        assert_present(results, [*always(model), *final_outputs(model, analysis)])
        for stage in set(STAGES) - {analysis}:  # nothing of the stages the model does not take
            assert not list((results / stage).glob(f"{model}*")), (model, stage)
            assert not list((results / "figures" / stage).glob(f"{model}.*")), (model, stage)
    assert set(pd.read_csv(results / "alignment/gated.tsv", sep="\t")["model"]) == {"full"}  # the gate needs dynamics
    for table, stage in (("alignment/table1.tsv", "alignment"), ("continuity/table2.tsv", "continuity"),
                         ("coupling/models.tsv", "coupling"), ("topology/method_comparison.tsv", "topology")):
        assert set(pd.read_csv(results / table, sep="\t")["model"]) == {"full"} | ({f"only-{stage}"} & set(alone)), table
    assert set(pd.read_csv(results / "across_papers/models.tsv", sep="\t")["model"]) == {"full", *alone}
    # the WikiText-like paragraphs: measured and tabled as their own source, left out of source all
    prompts = pd.read_csv(results / "coupling/full/prompts.tsv", sep="\t")
    drawn = np.sort(np.random.default_rng(0).choice(np.arange(2, 18, 3), size=3, replace=False))  # the paragraphs
    assert prompts.query("source == 'wikitext'").prompt.unique().tolist() == [f"wikitext:{i}" for i in drawn]
    assert not prompts.query("source == 'wikitext'").pooled.any() and prompts.query("source != 'wikitext'").pooled.all()
    steps = pd.read_csv(results / "coupling/full/steps.tsv", sep="\t").query("variant == 'plain'")
    pooled_plain = prompts.query("pooled and variant == 'plain' and step == 0")
    assert (steps.query("source == 'all'").n_prompts == len(pooled_plain)).all()
    assert (steps.query("source == 'wikitext'").n_prompts == 3).all()
    regularity = pd.read_csv(results / "coupling/full/regularity.tsv", sep="\t")
    assert {"all", "wikitext"} <= set(regularity.source)
