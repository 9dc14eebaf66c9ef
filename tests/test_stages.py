"""The stage registry (crosslayer/stages.py): what the schema, the adapters, the report and the final
outputs derive from it."""

from pathlib import Path

import pytest
import yaml

from crosslayer.stages import ANALYSES, CAPABILITIES, STAGES, TOKENIZING_STAGES, Figure, Stage, stage, supported_stages

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())


def test_the_schema_enums_list_the_registry_analyses():
    model_entry = SCHEMA["properties"]["models"]["additionalProperties"]["properties"]
    assert tuple(model_entry["analyses"]["items"]["enum"]) == ANALYSES
    # the across-papers table joins the analyses that have a reader there (crosslayer/across/measures.py)
    measures = SCHEMA["properties"]["across_papers"]["properties"]["measures"]
    assert set(measures["items"]["enum"]) <= set(ANALYSES) and measures["default"] == measures["items"]["enum"]
    # every per-model analysis has a settings block the schema defines
    assert all(name in SCHEMA["properties"] for name in ANALYSES)


def test_every_figure_has_its_caption_and_names_are_unique():
    for s in STAGES:
        for figures in (s.figures, s.all_model_figures):
            assert len({f.name for f in figures}) == len(figures), s.name
            for f in figures:
                assert (ROOT / "workflow" / "report" / f"{f.caption}.rst").is_file(), (s.name, f.name, f.caption)
    assert len({s.name for s in STAGES}) == len(STAGES)


def test_stage_dependencies_and_capabilities_are_known():
    for s in STAGES:
        assert set(s.needs) <= set(CAPABILITIES), s.name
        assert all(stage(a).models == "analysis" for a in s.after), s.name
    assert set(TOKENIZING_STAGES) <= set(ANALYSES)
    with pytest.raises(ValueError, match=r"no stage 'nope': the stages are \['checkpoints'"):
        stage("nope")


@pytest.mark.parametrize("capabilities, supported, missing", [
    (CAPABILITIES, ANALYSES, {}),
    # an encoder (BERT): the weight analyses only
    ({"uniform_layers", "own_attention", "pre_mlp_stream", "closed_form"}, ("alignment", "continuity"),
     {"coupling": ["causal"], "dynamics": ["causal"], "embedding_noise": ["causal"], "topology": ["causal"]}),
    # the generic path: no pre-MLP stream, so no topology
    ({"causal", "uniform_layers", "own_attention"}, ("alignment", "continuity", "coupling", "dynamics", "embedding_noise"),
     {"topology": ["pre_mlp_stream"]}),
    # Gemma 4: layers of different shapes, KV-shared attention
    ({"causal", "pre_mlp_stream", "token_inputs", "gated_mlp"}, ("alignment", "dynamics", "embedding_noise", "topology"),
     {"continuity": ["uniform_layers"], "coupling": ["own_attention"]}),
])
def test_supported_stages_follow_from_the_capabilities(capabilities, supported, missing):
    assert supported_stages(capabilities) == (supported, missing)


def test_an_unknown_capability_is_refused():
    with pytest.raises(ValueError, match=r"unknown capabilities \['telepathy'\]"):
        supported_stages({"causal", "telepathy"})


def test_final_outputs_expand_per_model_and_once():
    s = Stage("demo", "005", "a demo", "Demo", tables=("results/demo/{model}/t.tsv",), summaries=("results/demo/all.tsv",),
              figures=(Figure("a", "demo_a"), Figure("b", "demo_b", pdf=False)),
              all_model_figures=(Figure("c", "demo_c"),))
    assert s.final_outputs([]) == []
    assert s.final_outputs(["m1", "m2"]) == [
        "results/demo/all.tsv",
        "results/figures/demo/all_models.c.png", "results/figures/demo/all_models.c.pdf",
        "results/demo/m1/t.tsv", "results/demo/m2/t.tsv",
        "results/figures/demo/m1.a.png", "results/figures/demo/m2.a.png",
        "results/figures/demo/m1.a.pdf", "results/figures/demo/m2.a.pdf",
        "results/figures/demo/m1.b.png", "results/figures/demo/m2.b.png",
    ]
    runs = Stage("runs", "005", "own runs", "Demo", models="none", figures=(Figure("f", "runs_f", path="results/figures/r/f"),))
    assert runs.final_outputs(False) == [] and runs.final_outputs(True) == ["results/figures/r/f.png",
                                                                            "results/figures/r/f.pdf"]


def test_the_adapters_declare_capabilities_not_stages():
    from tiny_families import CONFIGS, GEMMA4

    from crosslayer.models.adapters import adapter_for

    def capabilities(family):
        return adapter_for({**CONFIGS, **GEMMA4}[family]()).capabilities

    llama = capabilities("llama")
    assert {"causal", "closed_form", "gated_mlp"} <= llama and "parallel_block" not in llama
    assert supported_stages(llama)[0] == ANALYSES
    assert "parallel_block" in capabilities("gpt_neox")
    assert supported_stages(capabilities("gemma4"))[0] == ("alignment", "dynamics", "embedding_noise", "topology")
