"""Settings that used to be refused late (in a job, after others ran) or not at all are refused by
check_config and the schema before any job, naming the key."""

import copy
from pathlib import Path

import pytest
import torch
import yaml
from snakemake.utils import validate

from crosslayer.config import check_config, check_model_entries, torchvision_keys

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = str(ROOT / "config" / "schema.yaml")


@pytest.fixture(scope="module")
def embedded():
    """The embedded default, validated (the schema's defaults filled in)."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    validate(config, SCHEMA)
    return config


def changed(config, **blocks):
    """A copy of `config` with the keys of each block changed (``prompts`` of coupling merged too)."""
    config = copy.deepcopy(config)
    for block, changes in blocks.items():
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(config[block].get(key), dict):
                config[block][key].update(value)
            else:
                config[block][key] = value
    return config


def test_the_embedded_default_passes(embedded):
    check_model_entries(embedded)
    check_config(embedded)


# -- 1. a read checkpoint without a tokenizer, in a stage that tokenizes ------------------------------


def local(embedded, **entry):
    config = copy.deepcopy(embedded)
    config["models"] = {"m": {"source": "local", "checkpoints": {"1": "/ckpt/1", "2": "/ckpt/2"}, **entry}}
    return config


SIZES = {"m": {"n_layers": 6, "d_model": 128, "d_ff": 512}}


def test_a_local_checkpoint_without_tokenizer_files_is_refused_when_a_stage_tokenizes(embedded):
    config = local(embedded)
    with pytest.raises(ValueError, match=r"^models\.m\.checkpoints: step 2 \(/ckpt/2\) holds no tokenizer files, and "
                                         r"the coupling, dynamics, topology, evaluation stage\(s\) tokenize text .* "
                                         r"\(tokenizer\.save_pretrained .* set models\.m\.analyses: "
                                         r"\['alignment', 'continuity'\] and evaluation\.activate: false$"):
        check_config(config, sizes=SIZES, untokenized={"m": {2: "/ckpt/2"}})
    check_config(config, sizes=SIZES, untokenized={"m": {}})  # every step has one
    # the fix the message proposed once (weight analyses only) is not enough: held-out loss tokenizes too
    # (the probe: accepted, then failed 20 jobs later in heldout_loss)
    with pytest.raises(ValueError, match=r"the evaluation stage\(s\) tokenize .* and evaluation\.activate: false$"):
        check_config(local(embedded, analyses=["alignment", "continuity"]), sizes=SIZES,
                     untokenized={"m": {2: "/ckpt/2"}})
    with pytest.raises(ValueError, match=r"the evaluation, benchmarks stage\(s\) tokenize .* and evaluation\.activate: "
                                         r"false and benchmarks\.activate: false$"):
        check_config(changed(local(embedded, analyses=["alignment", "continuity"]), benchmarks={"activate": True}),
                     sizes=SIZES, untokenized={"m": {2: "/ckpt/2"}})
    # the weight stages read no text: no tokenizer needed
    weights_only = changed(local(embedded, analyses=["alignment", "continuity"]), evaluation={"activate": False})
    check_config(weights_only, sizes=SIZES, untokenized={"m": {2: "/ckpt/2"}})
    weights_only = changed(config, dynamics={"activate": False}, topology={"activate": False},
                           coupling={"activate": False}, evaluation={"activate": False})
    check_config(weights_only, sizes=SIZES, untokenized={"m": {2: "/ckpt/2"}})
    # an encoder's held-out loss is not measured: it reads no text there
    encoder = {"m": ("bert", frozenset({"uniform_layers"}), "has no causal residual stream")}
    check_config(local(embedded, analyses=["alignment", "continuity"]), sizes=SIZES, families=encoder,
                 untokenized={"m": {2: "/ckpt/2"}})


# -- 2. the across-papers coupling columns of a variant no prompt has ---------------------------------


@pytest.mark.parametrize("cot", [False, []])
def test_the_cot_variant_across_papers_needs_cot_prompts(embedded, cot):
    config = changed(embedded, across_papers={"coupling_variant": "cot"}, coupling={"prompts": {"cot": cot}})
    with pytest.raises(ValueError, match=r"^across_papers\.coupling_variant: cot, but coupling\.prompts\.cot is empty"):
        check_config(config)
    check_config(changed(embedded, across_papers={"coupling_variant": "cot"}))  # the default's cot: [corpus]
    check_config(changed(config, across_papers={"measures": ["alignment"]}))  # no coupling columns
    check_config(changed(config, coupling={"activate": False}))  # no coupling results: the log says so


# -- 3. the untrained twin's seed: torch's range -------------------------------------------------------


def test_the_init_seed_is_bounded_by_torchs_seed_range(embedded):
    top = 2**64 - 1
    torch.manual_seed(top)  # the largest seed torch takes
    with pytest.raises((RuntimeError, ValueError), match="Overflow"):  # what build_untrained hit, after other jobs ran
        torch.manual_seed(top + 1)
    for seed, fails in ((0, False), (top, False), (top + 1, "greater than the maximum"), (-1, "less than the minimum")):
        config = local(embedded, init={"seed": seed})
        if fails:
            with pytest.raises(Exception, match=fails) as caught:
                validate(config, SCHEMA)
            assert "['init']['seed']" in str(caught.value)
        else:
            validate(config, SCHEMA)


# -- 4. a CoT source that is not in the prompt set -------------------------------------------------


@pytest.mark.parametrize("prompts, match", [
    ({"cot": ["gsm8k"]}, r"coupling\.prompts\.cot: 'gsm8k' is not a source of the prompt set \['file', 'corpus'\]: "
                         r"no coupling\.prompts\.datasets entry is labelled 'gsm8k'"),
    ({"corpus_paragraphs": 0}, r"coupling\.prompts\.cot: names corpus \(as the embedded default does\), but "
                               r"coupling\.prompts\.corpus_paragraphs is 0"),
    ({"file": None, "cot": ["file"]}, r"coupling\.prompts\.cot: names file, but coupling\.prompts\.file is null"),
])
def test_a_cot_source_outside_the_prompt_set_is_refused_naming_the_keys(embedded, prompts, match):
    with pytest.raises(ValueError, match="^" + match):
        check_config(changed(embedded, coupling={"prompts": prompts}))


def test_cot_sources_in_the_prompt_set_pass(embedded):
    gsm8k = {"label": "gsm8k", "path": "openai/gsm8k", "split": "test", "field": "question"}
    for prompts in ({"cot": True}, {"cot": ["file", "corpus"]}, {"datasets": [gsm8k], "cot": ["gsm8k"]},
                    {"corpus_paragraphs": 0, "cot": False}):
        check_config(changed(embedded, coupling={"prompts": prompts}))


def test_regularity_source_and_pooling_name_sources_of_the_prompt_set(embedded):
    wikitext = {"label": "wikitext", "path": "Salesforce/wikitext", "split": "test", "field": "text", "pooled": False}
    check_config(changed(embedded, coupling={"prompts": {"datasets": [wikitext]}, "regularity_source": "wikitext"}))
    check_config(changed(embedded, coupling={"regularity_source": "corpus"}))
    with pytest.raises(ValueError, match=r"^coupling\.regularity_source: 'wikitext' is not a source of the prompt "
                                         r"set; choose all or one of \['file', 'corpus'\]"):
        check_config(changed(embedded, coupling={"regularity_source": "wikitext"}))
    alone = {"file": None, "corpus_paragraphs": 0, "cot": False, "datasets": [wikitext]}
    with pytest.raises(ValueError, match=r"^coupling\.prompts\.datasets: every prompt source \(\['wikitext'\]\) has "
                                         "pooled: false"):
        check_config(changed(embedded, coupling={"prompts": alone}))


# -- 5. prompts cut to more tokens than a model's context ------------------------------------------------


def test_max_tokens_beyond_a_known_context_is_refused(embedded):
    with pytest.raises(ValueError, match=r"^coupling\.prompts\.max_tokens: 200 is more than the context of "
                                         r"models\.tiny-gelu, 128 tokens \(models\.tiny-gelu\.train\.context or "
                                         r"train\.context\), .*lower it to 128 or less"):
        check_config(changed(embedded, coupling={"prompts": {"max_tokens": 200}}))
    check_config(changed(embedded, coupling={"prompts": {"max_tokens": 128}}))
    check_config(changed(embedded, coupling={"prompts": {"max_tokens": None}}))  # prompts checked in the job
    config = changed(local(embedded), coupling={"prompts": {"max_tokens": 64}})
    with pytest.raises(ValueError, match=r"^coupling\.prompts\.max_tokens: 64 is more than the context of models\.m, "
                                         r"32 tokens \(its config\.json\)"):
        check_config(config, sizes=SIZES, contexts={"m": 32})
    check_config(config, sizes=SIZES, contexts={"m": None})  # a family without a limit
    check_config(local(embedded, analyses=["alignment"]), sizes=SIZES, contexts={"m": 32})  # reads no prompt


# -- 6. torchvision's MNIST ---------------------------------------------------------------------------


def test_torchvision_keys_name_the_setting_that_needs_the_extra(embedded):
    assert torchvision_keys(embedded) == []
    config = changed(embedded, toy={"data": {"source": "torchvision", "directory": "mnist"}})
    assert torchvision_keys(config) == ["toy.data.source"]
    assert torchvision_keys(changed(config, toy={"activate": False})) == []
    config["toy"]["runs"] = {}  # no toy job reads MNIST
    assert torchvision_keys(config) == []


def test_a_replaced_toy_key_says_what_to_write_instead():
    from crosslayer.schema_types import renamed_keys

    assert renamed_keys({"toy": {"steps": 10, "runs": {"r": {"activation": "relu"}}}}) == []
    messages = renamed_keys({"toy": {"epochs": 3, "runs": {"a": {"epochs": 5}, "b": {}}}})
    assert [m.split(" is replaced")[0] for m in messages] == ["toy.epochs", "toy.runs.a.epochs"]
    assert all("toy.steps" in m and "9,380" in m for m in messages)
    assert renamed_keys({}) == [] and renamed_keys({"toy": None}) == []
