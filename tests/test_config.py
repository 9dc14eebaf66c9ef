"""The config (crosslayer.config): steps, checkpoints and settings resolved from either form, every
refusal naming its key, the keys a message names in the schema, and config/README.md documenting
every key with the schema's default."""

import ast
import re
from pathlib import Path

import pytest
import yaml

from crosslayer.across.catalog import catalog
from crosslayer.config import (
    across_papers_settings,
    check_config,
    check_model_entries,
    check_model_sizes,
    dataset_keys,
    local_checkpoints,
    model_steps,
    reference_step,
    resolve_checkpoints,
    train_settings,
)


def config_with(**model):
    entry = {"source": "train", "arch": "llama", "steps": [0, 10, 100], **model}
    return {
        "models": {"m": entry},
        "train": {"d_model": 32, "n_layers": 6, "d_ff": 64, "n_heads": 4, "threads": 1},
        "alignment": {"k": 10, "distances": [1, 3, 5]},
        "dynamics": {"activate": True, "k": 10, "min_tokens": 8, "max_tokens": 16, "regime_boundaries": None},
        "topology": {"activate": True, "k": 10},
        "coupling": {"activate": True, "Ks": [4, 8], "window": 5, "scores": None,
                     "token_wise": {"layer_pairs": [[0, 1]], "prompts": 1}},
        "continuity": {"activate": True, "pca_components": 3},
        "embedding_noise": {"activate": False},
        "toy": {"activate": True, "runs": {}, "data": {"source": "package", "directory": None}},
        "transformer_ablations": {"activate": True, "steps": 10, "checkpoints": [], "train": {}, "runs": {"r": {}}},
    }


def coupling(**changes):
    return {"coupling": {**config_with()["coupling"], **changes}}


def test_model_steps_sorted_from_either_form():
    assert model_steps({"steps": [10, 0, 5]}) == [0, 5, 10]
    assert model_steps({"checkpoints": {"7": "/a", 3: "/b"}}) == [3, 7]


def test_local_checkpoints_and_train_overrides():
    assert local_checkpoints({"checkpoints": {"7": "/ckpt/7"}}) == {7: "/ckpt/7"}
    config = config_with(train={"n_heads": 2})
    assert train_settings(config, "m") == {"d_model": 32, "n_layers": 6, "d_ff": 64, "n_heads": 2, "threads": 1}


def test_reference_step_configured_or_middle():
    assert reference_step({"steps": [0, 10, 100, 1000]}) == 100
    assert reference_step({"steps": [0, 10, 100], "reference_step": 0}) == 0


@pytest.mark.parametrize(
    "model, top, match",
    [
        ({"reference_step": 7}, {}, r"models\.m\.reference_step: 7 is not one of"),
        ({"train": {"n_heads": 5}}, {}, r"models\.m\.train\.n_heads: 5 must divide d_model = 32"),
        ({}, {"alignment": {"k": 32, "distances": [1]}}, r"alignment\.k: 32 must be smaller than d_model and d_ff of "
                                                          r"models\.m \(6 layers, d_model = 32, d_ff = 64\)"),
        ({"train": {"d_ff": 8}}, {}, r"alignment\.k: 10 must be smaller than d_model and d_ff of models\.m"),
        ({}, {"alignment": {"k": 3, "distances": [1, 6]}}, r"alignment\.distances: \[6\] must be below the number"),
        ({"train": {"d_model": 8, "n_heads": 2}}, {"alignment": {"k": 3, "distances": [1]}},
         r"dynamics\.k: 10 must be smaller than d_model of models\.m"),
        ({}, {"dynamics": {"activate": True, "k": 3, "min_tokens": 20, "max_tokens": 16, "regime_boundaries": None}},
         r"dynamics\.min_tokens: 20 must not exceed dynamics\.max_tokens = 16"),
        ({}, {"dynamics": {"activate": True, "k": 3, "min_tokens": 8, "max_tokens": 16, "regime_boundaries": [4, 2]}},
         r"dynamics\.regime_boundaries: \[4, 2\] must be .* increasing"),
        ({}, {"dynamics": {"activate": True, "k": 3, "min_tokens": 8, "max_tokens": 16, "regime_boundaries": [2, 7]}},
         r"dynamics\.regime_boundaries: \[2, 7\] must not exceed the number of layers"),
        ({}, {"dynamics": {"activate": False}}, r"topology\.activate: the topology stages need the dynamics"),
        ({}, coupling(Ks=[4, 33]), r"coupling\.Ks: \[4, 33\] must not exceed d_model of models\.m"),
        ({}, coupling(window=4), r"coupling\.window: 4 must be odd"),
        ({}, coupling(window=9), r"coupling\.window: 9 is longer than the 7 states of a trajectory of models\.m"),
        ({}, coupling(token_wise={"layer_pairs": [[0, 6]], "prompts": 1}),
         r"coupling\.token_wise\.layer_pairs: \[\[0, 6\]\] must be layers below 6"),
        ({}, {"continuity": {"activate": True, "pca_components": 6}},
         r"continuity\.pca_components: 6 must be below the number of layers of models\.m \(6 layers"),
        ({}, {"toy": {"activate": True, "runs": {"r": {}}, "data": {"source": "torchvision", "directory": None}}},
         r"toy\.data\.directory: needed for source torchvision"),
        ({}, {"toy": {"activate": True, "runs": {"r": {}}, "data": {"source": "package"},
                      "datasets": {"names": ["svhn"], "runs": ["r", "q"], "directory": "sets"}}},
         r"toy\.datasets\.runs: \['q'\] are not runs of toy\.runs"),
        ({}, {"toy": {"activate": True, "runs": {"r": {}}, "data": {"source": "package"},
                      "datasets": {"names": ["svhn"], "runs": [], "directory": "sets"}}},
         r"toy\.datasets\.names: \['svhn'\] but toy\.datasets\.runs is empty"),
        ({}, {"toy": {"activate": True, "runs": {"r": {}}, "data": {"source": "package"},
                      "datasets": {"names": ["cifar10"], "runs": ["r"], "directory": None}}},
         r"toy\.datasets\.directory: needed for toy\.datasets\.names"),
        ({}, {"transformer_ablations": {"activate": True, "steps": 10, "train": {"n_heads": 5}, "runs": {"r": {}}}},
         r"transformer_ablations\.train\.n_heads: 5 must divide d_model = 32"),
        ({}, {"transformer_ablations": {"activate": True, "steps": 10, "checkpoints": [0, 12, 10], "train": {},
                                        "runs": {"r": {}}}},
         r"transformer_ablations\.checkpoints: \[12, 10\] not below transformer_ablations\.steps \(10"),
        ({}, {"transformer_ablations": {"activate": True, "steps": 10, "checkpoints": [], "train": {"n_layers": 3},
                                        "runs": {"r": {}}}},
         r"continuity\.pca_components: 3 must be below the 3 layers of the transformer ablations"),
        ({}, coupling(scores="/no/such/scores.csv"), r"coupling\.scores: cannot read /no/such/scores\.csv"),
        ({"source": "hub", "arch": None, "repo": "a/b", "revision": "main"}, {}, r"models\.m: .*'revision'"),
        ({}, coupling(depthwise_token=24, prompts={"max_tokens": 24}),
         r"coupling\.depthwise_token: 24 lies outside every prompt, which coupling\.prompts\.max_tokens cuts to 24 "
         r"tokens; choose from -24 to 23"),
        ({}, coupling(depthwise_token=-25, prompts={"max_tokens": 24}), r"coupling\.depthwise_token: -25 lies outside"),
        ({}, coupling(prompts={"max_tokens": 8}, token_wise={"layer_pairs": [[0, 1]], "prompts": 1, "tokens": 12}),
         r"coupling\.token_wise\.tokens: 12 is more than the 8 tokens"),
    ],
)
def test_check_config_names_the_key(model, top, match):
    config = config_with(**model)
    entry = config["models"]["m"]
    for key in [k for k, v in entry.items() if v is None]:
        del entry[key]
    config.update(top)
    with pytest.raises(ValueError, match=match) as caught:
        check_config(config)
    assert_names_a_schema_key(str(caught.value))


def test_prompt_positions_within_max_tokens_are_accepted():
    for token in (-24, -1, 0, 23):
        check_config({**config_with(), **coupling(depthwise_token=token, prompts={"max_tokens": 24})})
    check_config({**config_with(), **coupling(depthwise_token=100, prompts={"max_tokens": None})})  # job checks


def test_size_bounds_apply_only_to_the_stages_a_model_takes_part_in():
    # a small encoder read by the weight stages beside a model that runs them all: settings sized
    # for the large model are no error for the small one, unless its own stages use them
    config = config_with()
    config["models"]["bert"] = {"source": "local", "checkpoints": {"0": "/x"}, "analyses": ["alignment"]}
    config["alignment"] = {"k": 3, "distances": [1]}
    small = {"bert": {"n_layers": 3, "d_model": 8, "d_ff": 32}}  # window 5 > 4 states; dynamics.k 10 > 8
    check_config(config, sizes=small)
    config["models"]["bert"]["analyses"] = ["alignment", "coupling"]
    with pytest.raises(ValueError, match=r"coupling\.window: 5 is longer than the 4 states of a trajectory of "
                                         r"models\.bert"):
        check_config(config, sizes=small)
    config["models"]["bert"]["analyses"] = ["alignment", "dynamics"]
    with pytest.raises(ValueError, match=r"dynamics\.k: 10 must be smaller than d_model of models\.bert"):
        check_config(config, sizes=small)
    config["alignment"]["k"] = 8
    with pytest.raises(ValueError, match=r"alignment\.k: 8 must be smaller than d_model and d_ff of models\.bert"):
        check_config(config, sizes=small)


# -- every config key a message names exists -----------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())


def resolved(node):
    """A schema node with its ``$ref`` and ``allOf`` parts merged in."""
    while "$ref" in node or "allOf" in node:
        if "$ref" in node:
            node = {**SCHEMA["$defs"][node["$ref"].split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
        else:
            merged = {k: v for k, v in node.items() if k != "allOf"}
            for sub in node["allOf"]:
                merged.setdefault("properties", {}).update(sub.get("properties", {}))
            node = merged
    return node


def schema_node(path):
    """The schema of a dotted config key (``*`` or any name for a free mapping's entries), or None."""
    node = SCHEMA
    for part in path.split("."):
        node = resolved(node)
        if part in node.get("properties", {}):
            node = node["properties"][part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return node


def assert_names_a_schema_key(message):
    key = re.match(r"[\w.-]+", message)[0].rstrip(".")
    assert schema_node(key) is not None, f"{message!r} names {key!r}, which is no key of config/schema.yaml"


def test_schema_lookup_knows_keys_from_missing_ones():
    assert schema_node("coupling.depthwise_token") and schema_node("models.m.analyses") and schema_node("train.device")
    assert schema_node("coupling.depthwise.token") is None and schema_node("alignment.kk") is None


_CONFIG_KEY = re.compile(r"(?<![\w.{])(?:" + "|".join(sorted(SCHEMA["properties"], key=len, reverse=True)) +
                         r")(?:\.(?:[A-Za-z_]\w*|\*))+")
_FILE_SUFFIXES = (".py", ".smk", ".yaml", ".json", ".tsv", ".npz", ".png", ".pdf", ".md", ".log")  # toy.yaml is a file


def string_literals(path):
    """Every string literal of a Python file, f-strings with ``*`` for each placeholder."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def test_every_config_key_a_message_names_is_in_the_schema():
    # An audit of every string in the library, the rule scripts and the rules: a dotted name that
    # starts like a config key (coupling.depthwise_token, models.<id>.analyses) must be one, so
    # that an error's advice can be followed as written
    sources = [*(ROOT / "workflow" / "crosslayer").rglob("*.py"), *(ROOT / "workflow" / "scripts").glob("*.py")]
    named = {}
    for path in sources:
        for text in string_literals(path):
            for match in _CONFIG_KEY.finditer(text):
                named.setdefault(match[0], set()).add(path.name)
    for path in (ROOT / "workflow" / "rules").glob("*.smk"):
        for match in _CONFIG_KEY.finditer(path.read_text()):
            named.setdefault(match[0], set()).add(path.name)
    named = {key: files for key, files in named.items() if not key.endswith(_FILE_SUFFIXES)}
    assert len(named) > 30, sorted(named)  # the scan finds the messages
    unknown = {key: sorted(files) for key, files in named.items() if schema_node(key) is None}
    assert not unknown, f"config keys named in messages but not in config/schema.yaml: {unknown}"


@pytest.mark.parametrize(
    "entry, match",
    [
        ({"source": "train", "arch": "llama", "steps": [0], "checkpoints": {"0": "/x"}},
         r"models\.m\.checkpoints: does not apply to `source: train` models, which read arch, train, steps"),
        ({"source": "local", "checkpoints": {"0": "/x"}, "steps": [0]},
         r"models\.m\.steps: does not apply to `source: local` models, which read checkpoints"),
        ({"source": "local", "checkpoints": {"0": "/x"}, "arch": "llama"}, r"models\.m\.arch: does not apply"),
        ({"source": "local", "checkpoints": {"0": "/x"}, "revision": "step{step}"}, r"models\.m\.revision: does not"),
        ({"source": "hub", "repo": "a/b", "steps": [0], "train": {}}, r"models\.m\.train: does not apply to `source: hub`"),
        ({"source": "local", "checkpoints": {"16": "/a", "016": "/b"}}, r"models\.m: .*'checkpoints': step 16 is given twice"),
        ({"source": "hub", "checkpoints": {"16": "a/b@x", "016": "a/b@y"}}, r"models\.m: .*step 16 is given twice"),
        ({"source": "train", "arch": "llama", "steps": [0], "init": {"seed": 0}},
         r"models\.m\.init: does not apply to `source: train` models"),
        ({"source": "hub", "repo": "a/b", "steps": [0, 8], "init": {"seed": 0}},
         r"models\.m\.init: step 0 is the untrained twin, but the model already has a step 0"),
        ({"source": "local", "checkpoints": {"00": "/x"}, "init": {}}, r"models\.m\.init: step 0 is the untrained"),
    ],
)
def test_settings_a_source_would_ignore_and_repeated_steps_are_refused_by_key(entry, match):
    with pytest.raises(ValueError, match=match) as caught:
        check_model_entries({"models": {"m": entry}})
    assert_names_a_schema_key(str(caught.value))


def test_sizes_of_read_checkpoints_are_checked_too():
    config = config_with(source="local", checkpoints={"0": "/x"}, steps=None, arch=None)
    del config["models"]["m"]["steps"], config["models"]["m"]["arch"]
    check_config(config)  # sizes unknown: left to the jobs
    with pytest.raises(ValueError, match=r"topology\.k: 10 must be smaller than d_model of models\.m "
                                         r"\(12 layers, d_model = 10, d_ff = 40\)"):
        check_config({**config, "dynamics": {**config["dynamics"], "k": 3}, "alignment": {"k": 3, "distances": [1]}},
                     sizes={"m": {"n_layers": 12, "d_model": 10, "d_ff": 40}})
    check_model_sizes(config, "m", n_layers=6, d_model=11, d_ff=11)  # k = 10 < 11: accepted


def test_check_config_accepts_the_embedded_default():
    import yaml
    from snakemake.utils import validate

    root = Path(__file__).parents[1]
    config = yaml.safe_load((root / "config" / "config.yaml").read_text())
    validate(config, str(root / "config" / "schema.yaml"))  # fills in the schema's defaults
    check_model_entries(config)
    check_config(config)


# -- resolve_checkpoints ------------------------------------------------------------------------


def test_resolve_template_form():
    cfg = {"repo": "EleutherAI/pythia-410m", "revision": "step{step}", "steps": [128, 0, "1000"]}
    assert resolve_checkpoints(cfg) == {
        0: {"repo": "EleutherAI/pythia-410m", "revision": "step0"},
        128: {"repo": "EleutherAI/pythia-410m", "revision": "step128"},
        1000: {"repo": "EleutherAI/pythia-410m", "revision": "step1000"},
    }


def test_resolve_template_with_format_spec():
    cfg = {"repo": "a/b", "revision": "iter_{step:07d}", "steps": [5]}
    assert resolve_checkpoints(cfg) == {5: {"repo": "a/b", "revision": "iter_0000005"}}


def test_resolve_explicit_form_with_yaml_string_keys():
    cfg = {"checkpoints": {
        "50000": "PY007/TinyLlama-1.1B-step-50K-105b@main",
        240000: "TinyLlama/TinyLlama-1.1B-intermediate-step-240k-503b",
        "1": "org/name@v1.0",
    }}
    assert resolve_checkpoints(cfg) == {
        1: {"repo": "org/name", "revision": "v1.0"},
        50000: {"repo": "PY007/TinyLlama-1.1B-step-50K-105b", "revision": "main"},
        240000: {"repo": "TinyLlama/TinyLlama-1.1B-intermediate-step-240k-503b", "revision": "main"},
    }
    assert list(resolve_checkpoints(cfg)) == [1, 50000, 240000]


@pytest.mark.parametrize(
    ("cfg", "key"),
    [
        ({"revision": "step{step}", "steps": [0]}, "'repo'"),
        ({"repo": "a/b", "steps": [0, 1]}, "'revision'"),  # main for every step
        ({"repo": "a/b", "revision": "step{step}"}, "'steps'"),
        ({}, "'repo'"),
        ({"repo": "a/b", "revision": "main", "steps": [0, 1]}, "'revision'"),
        ({"repo": "a/b", "revision": "step{stp}", "steps": [0]}, "'revision'"),
        ({"repo": "a/b", "revision": "step{step}", "steps": ["x"]}, "'steps'"),
        ({"repo": "a/b", "revision": "step{step}", "steps": 128}, "'steps'"),
        ({"checkpoints": {}}, "'checkpoints'"),
        ({"checkpoints": {"ten": "a/b@main"}}, "'checkpoints.ten'"),
        ({"checkpoints": {10: "@main"}}, "'checkpoints.10'"),
        ({"checkpoints": {10: "a/b", "10": "a/c"}}, "'checkpoints.10'"),
    ],
)
def test_resolve_rejects_incomplete_config(cfg, key):
    with pytest.raises(ValueError, match=key):
        resolve_checkpoints(cfg)


def test_toy_settings_merge_the_run_over_the_block():
    from crosslayer.config import toy_settings

    toy = {"activation": "relu", "residual": True, "layernorm": False, "width": 128, "depth": 16, "init_scale": None,
           "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "batch_size": 128, "steps": 9380, "track": 20,
           "ema_betas": [0.9], "runs": {"r": {"activation": "none", "init_scale": 1e-4, "steps": 23450, "eps": 1.0}}}
    settings = toy_settings({"toy": toy}, "r")
    assert settings["activation"] == "none" and settings["init_scale"] == 1e-4 and settings["steps"] == 23450
    assert settings["width"] == 128 and settings["eps"] == 1.0 and settings["ema_betas"] == (0.9,)


def test_ablation_settings_layer_the_run_over_the_ablations_over_the_train_block():
    from crosslayer.config import ablation_settings

    config = config_with()
    config["transformer_ablations"] = {"steps": 150, "checkpoints": [], "train": {"d_model": 64},
                                       "runs": {"base": {}, "nores": {"residual": False, "activation": "none"}}}
    assert ablation_settings(config, "base") == {**config["train"], "d_model": 64, "activation": "silu",
                                                 "residual": True, "norm": True, "save_steps": [150]}
    config["transformer_ablations"]["checkpoints"] = [50, 0]
    assert ablation_settings(config, "base")["save_steps"] == [0, 50, 150]
    nores = ablation_settings(config, "nores")
    assert (nores["residual"], nores["activation"], nores["norm"], nores["n_layers"]) == (False, "none", True, 6)


def test_train_overrides_are_train_settings_without_defaults():
    import yaml

    defs = yaml.safe_load((Path(__file__).parents[1] / "config/schema.yaml").read_text())["$defs"]
    settings, overrides = defs["train_settings"]["properties"], defs["train_overrides"]["properties"]
    assert overrides == {key: {k: v for k, v in spec.items() if k != "default"} for key, spec in settings.items()}


def test_a_models_train_block_changes_only_the_keys_it_names():
    # Defaults filled into a per-model block would silently replace the top-level settings.
    from snakemake.utils import validate

    config = {"models": {"m": {"source": "train", "arch": "llama", "steps": [0], "train": {"lr": 0.01}}},
              "train": {"d_model": 32}, "transformer_ablations": {"train": {"n_layers": 3}}}
    validate(config, str(Path(__file__).parents[1] / "config/schema.yaml"))
    assert config["models"]["m"]["train"] == {"lr": 0.01} and config["transformer_ablations"]["train"] == {"n_layers": 3}
    settings = train_settings(config, "m")
    assert (settings["d_model"], settings["lr"], settings["n_layers"]) == (32, 0.01, 6)


def test_model_analyses_are_the_activated_stages_a_model_names():
    from crosslayer.config import ANALYSES, model_analyses, models_for, selected_models

    config = config_with()
    config["models"]["enc"] = {"source": "local", "checkpoints": {"1": "/e"}, "analyses": ["continuity", "alignment"]}
    assert model_analyses(config, "m") == [a for a in ANALYSES if a != "embedding_noise"]  # not activated
    config["embedding_noise"]["activate"] = True
    assert model_analyses(config, "m") == list(ANALYSES)
    assert model_analyses(config, "enc") == ["alignment", "continuity"]  # in stage order
    config["continuity"]["activate"] = False
    assert model_analyses(config, "enc") == ["alignment"]  # alignment has no switch
    assert models_for(config, "dynamics") == ["m"] and models_for(config, "alignment") == ["m", "enc"]
    assert list(selected_models({**config, "run_models": ["enc"]})) == ["enc"]
    with pytest.raises(ValueError, match=r"run_models: \['x'\] not in models"):
        selected_models({**config, "run_models": ["enc", "x"]})


def test_a_weight_only_family_in_an_activation_stage_is_refused_naming_model_and_stages():
    BERT = {"closed_form", "uniform_layers", "own_attention", "pre_mlp_stream"}  # what an encoder can do: not causal
    config = config_with()
    config["models"]["enc"] = {"source": "local", "checkpoints": {"1": "/e"}}
    with pytest.raises(ValueError, match=r"models.enc.analyses: bert has no causal residual stream, so the "
                                         r"coupling, dynamics, topology stage\(s\) cannot run on it; set "
                                         r"models.enc.analyses: \['alignment', 'continuity'\]"):
        check_config(config, families={"enc": ("bert", BERT, "has no causal residual stream")})
    config["models"]["enc"]["analyses"] = ["alignment", "continuity"]
    check_config(config, families={"enc": ("bert", BERT, "has no causal residual stream")})
    config["models"]["m"]["analyses"] = ["alignment", "topology"]
    with pytest.raises(ValueError, match=r"models.m.analyses: topology needs dynamics"):
        check_config(config)


# -- config/README.md documents every key with the schema's default -------------------------------


def documented_defaults():
    """``{dotted key: default cell}`` from config/README.md's tables: a row names one key or several
    (`` `dataset.path`, `.name` `` continues the first one's parent), with one default each."""
    found, tops = {}, []
    for line in (ROOT / "config" / "README.md").read_text().splitlines():
        if line.startswith("## "):
            tops = re.findall(r"`(\w+)`", line)
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")] if line.startswith("| `") else []
        if not tops or tops == ["models"] or len(cells) < 3:
            continue
        names = re.findall(r"`([\w.]+)`", cells[0])
        names = [names[0].rsplit(".", 1)[0] + name if name.startswith(".") else name for name in names]
        defaults = cells[1].split(", ") if len(names) > 1 else [cells[1]]
        assert len(defaults) == len(names), f"config/README.md row {cells[0]}: {len(names)} keys, defaults {cells[1]}"
        for name, default in zip(names, defaults):
            found[name if name in tops else f"{tops[0]}.{name}"] = default
    return found


def schema_keys(node=SCHEMA, prefix=""):
    """``(dotted key, schema)`` of every configurable key below `prefix`, ``$ref`` resolved (models'
    entries excluded: their table has no defaults)."""
    for name, sub in node.get("properties", {}).items():
        sub = resolved(sub)
        key = f"{prefix}.{name}" if prefix else name
        if key != "models":
            yield key, sub
            yield from schema_keys(sub, key)


def as_value(cell):
    """A README default cell as a YAML value (`` `warn` `` -> "warn", −1 -> -1, null -> None)."""
    return yaml.safe_load(cell.replace("`", "").replace("−", "-"))


def test_config_readme_documents_every_key_with_the_schemas_default():
    documented = documented_defaults()
    assert len(documented) > 100  # the tables were found
    undocumented, differ = [], []
    for key, node in schema_keys():
        parents = [key.rsplit(".", n)[0] for n in range(key.count(".") + 1)]
        if "properties" not in node and not any(parent in documented for parent in parents):
            undocumented.append(key)  # a setting with neither a row of its own nor one for a block holding it
        elif key in documented and "default" in node and as_value(documented[key]) != node["default"]:
            differ.append(f"{key}: README {documented[key]!r}, schema {node['default']!r}")
    assert not undocumented, f"keys of config/schema.yaml missing from config/README.md: {undocumented}"
    assert not differ, "defaults that differ between config/README.md and config/schema.yaml:\n" + "\n".join(differ)
    unknown = [key for key in documented if schema_node(key) is None]
    assert not unknown, f"config/README.md documents keys config/schema.yaml does not have: {unknown}"


def test_an_untrained_twin_is_step_0_of_hub_and_local_models():
    from crosslayer.config import untrained_seed

    local = {"source": "local", "checkpoints": {"16": "/a", "4": "/b"}, "init": {"seed": 7}}
    assert model_steps(local) == [0, 4, 16] and untrained_seed(local) == 7
    assert local_checkpoints(local) == {16: "/a", 4: "/b"}  # the twin is built, not read from a directory
    hub = {"source": "hub", "checkpoints": {"1": "a/b@main"}, "init": {}}
    assert model_steps(hub) == [0, 1] and untrained_seed(hub) == 0 and list(resolve_checkpoints(hub)) == [1]
    assert untrained_seed({"source": "hub", "checkpoints": {"1": "a/b"}}) is None


def test_a_fit_subset_names_only_models_of_the_coupling_stage():
    config = config_with()
    config["coupling"]["fit_subsets"] = {"pythia": ["m", "other"]}
    with pytest.raises(ValueError, match=r"coupling.fit_subsets.pythia: \['other'\] are not models of the coupling"):
        check_config(config)
    config["coupling"]["fit_subsets"] = {"pythia": ["m"]}
    check_config(config)


def test_dataset_keys_name_each_setting_that_needs_the_datasets_extra():
    config = config_with()
    assert dataset_keys(config) == []  # as the embedded default: offline text only
    config["corpus"] = {"source": "dataset"}
    config["dynamics"]["samples"] = {"source": "dataset"}
    config["coupling"]["prompts"] = {"datasets": [{"path": "allenai/ai2_arc"}]}
    assert dataset_keys(config) == ["corpus.source", "dynamics.samples.source", "coupling.prompts.datasets"]
    config["dynamics"]["activate"] = config["coupling"]["activate"] = False  # their samples and prompts go unread
    assert dataset_keys(config) == ["corpus.source"]


def test_a_dataset_source_without_the_datasets_package_names_the_key_and_the_extra(monkeypatch):
    import sys

    from crosslayer.data.samples import dataset_texts

    monkeypatch.setitem(sys.modules, "datasets", None)  # as if the extra were not installed
    with pytest.raises(ImportError, match=r"dynamics\.samples\.dataset asks for a Hugging Face dataset, .*'datasets': "
                                          r"pip install -e '\.\[datasets\]'"):
        dataset_texts("Salesforce/wikitext", key="dynamics.samples.dataset")


def test_data_rules_pass_only_the_settings_their_source_reads():
    # a key of a source not selected must not reach a rule's params: a dataset's path under the
    # offline corpus re-trained every model (issue 39; tests/workflow/test_reruns.py plans it on the workflow)
    from crosslayer.config import corpus_params, mnist_params, samples_params

    dataset = {"path": "Salesforce/wikitext", "name": None, "split": "train"}
    corpus = {"source": "wikipedia", "dataset": dataset, "tokenizer": None, "tokenizer_revision": "main",
              "vocab_size": 512, "max_chars": 1000}
    assert corpus_params(corpus) == {"source": "wikipedia", "max_chars": 1000, "tokenizer": None, "vocab_size": 512}
    assert corpus_params(corpus | {"source": "dataset", "tokenizer": "gpt2"}) == {
        "source": "dataset", "max_chars": 1000, "tokenizer": "gpt2", "dataset": dataset, "tokenizer_revision": "main"}
    assert samples_params({"source": "corpus", "dataset": dataset}) == {"source": "corpus"}
    assert samples_params({"source": "dataset", "dataset": dataset}) == {"source": "dataset", "dataset": dataset}
    data = {"source": "package", "directory": "mnist", "test_fraction": 0.2, "seed": 1}
    assert mnist_params(data) == {"source": "package", "test_fraction": 0.2, "seed": 1}
    assert mnist_params(data | {"source": "directory"}) == {"source": "directory", "directory": "mnist"}


# -- settings of other stages' blocks ------------------------------------------------------


def across_papers_config(**across):
    return {"across_papers": {"projections": None, "Ks": None, "community_method": None, **across},
            "continuity": {"projections": ["q", "o"]}, "coupling": {"Ks": [10, 30]},
            "topology": {"methods": ["signed_cpm", "infomap"]}}


def test_settings_default_to_what_the_stages_compute_and_name_the_key_otherwise():
    settings = across_papers_settings(across_papers_config())
    assert settings["projections"] == ["q", "o"] and settings["Ks"] == [10, 30]
    assert settings["community_method"] == "signed_cpm"
    assert [m.name for m in catalog(projections=["q"], Ks=[10])][:4] == [
        "alignment_output", "alignment_input", "continuity_q_u1", "continuity_q_v1"]
    for key, value, message in (("projections", ["v"], r"across_papers.projections: \['v'\] are not computed"),
                                ("Ks", [50], r"across_papers.Ks: \[50\] are not computed"),
                                ("community_method", "signed_rb", "across_papers.community_method: 'signed_rb'")):
        with pytest.raises(ValueError, match=message):
            across_papers_settings(across_papers_config(**{key: value}))


def effective_config(path):
    """A config file as the workflow reads it: the schema's defaults filled in."""
    from snakemake.utils import validate

    config = yaml.safe_load(Path(path).read_text())
    validate(config, str(Path(__file__).parents[1] / "config" / "schema.yaml"))
    return config


def other_type(value, key=""):
    """`value` with every number written as the other type its key's schema does not declare (an
    integer key's 3 as 3.0, a number key's 1.0 as 1, where integral), and the dotted keys changed."""
    if isinstance(value, dict):
        pairs = [other_type(item, f"{key}.{name}" if key else name) for name, item in value.items()]
        return dict(zip(value, (v for v, _ in pairs))), [k for _, keys in pairs for k in keys]
    if isinstance(value, list):
        pairs = [other_type(item, f"{key}.*") for item in value]  # an array's items: its node's `items`
        return [v for v, _ in pairs], [k for _, keys in pairs for k in keys]
    node = resolved(schema_node(key.replace(".*", "")) or {})
    node = resolved(node.get("items", node)) if key.endswith(".*") else node
    types = [node.get("type")] if isinstance(node.get("type"), str) else node.get("type", [])
    if type(value) is int and "integer" in types:
        return float(value), [key]
    if isinstance(value, float) and "number" in types and value.is_integer():
        return int(value), [key]
    return value, []


@pytest.mark.parametrize("path", ["config/config.yaml", "tests/configs/tiny.yaml"])
def test_every_number_takes_the_type_its_schema_key_declares(path):
    """One walk over the schema: every integer key given an integral float, and every number key an
    int, come back as the config wrote them (the same settings, so the same params)."""
    from crosslayer.schema_types import typed_config

    config = effective_config(Path(__file__).parents[1] / path)
    flipped, keys = other_type(config)
    assert len({k for k in keys if "*" not in k}) > 40 and repr(flipped) != repr(config)  # most keys, not a handful
    assert repr(typed_config(flipped, SCHEMA)) == repr(typed_config(config, SCHEMA))
    if path == "config/config.yaml":  # the default and the schema's defaults are written in their keys' types
        assert repr(typed_config(config, SCHEMA)) == repr(config)


def test_config_readme_documents_every_key_of_a_model_entry():
    # the models' table has no defaults column, so the walk over defaults above leaves it out
    text = (Path(__file__).parents[1] / "config" / "README.md").read_text()
    keys = resolved(SCHEMA["properties"]["models"]["additionalProperties"])["properties"]
    missing = [key for key in keys if not re.search(rf"^\| `{key}`[ |(]", text, re.M)]
    assert len(keys) > 10 and missing == [], f"model entry keys missing from config/README.md: {missing}"

