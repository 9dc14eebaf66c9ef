"""Settings that used to be refused late (in a job, after others ran) or not at all are refused by
check_config and the schema before any job, naming the key; and the file defects of issue 39: a
failed twin save leaves no temporary directory, a damaged .npz names itself and what to do."""

import copy
import errno
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from snakemake.utils import validate

from crosslayer.config import check_config, check_model_entries, torchvision_keys
from crosslayer.errors import CheckpointError, CorruptFileError
from crosslayer.npz import load_npz, open_npz

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
                                         r"the coupling, dynamics, topology stage\(s\) tokenize text .* "
                                         r"\(tokenizer\.save_pretrained .* set models\.m\.analyses: "
                                         r"\['alignment', 'continuity'\]"):
        check_config(config, sizes=SIZES, untokenized={"m": {2: "/ckpt/2"}})
    check_config(config, sizes=SIZES, untokenized={"m": {}})  # every step has one
    # the weight stages read no text: no tokenizer needed
    check_config(local(embedded, analyses=["alignment", "continuity"]), sizes=SIZES, untokenized={"m": {2: "/ckpt/2"}})
    weights_only = changed(config, dynamics={"activate": False}, topology={"activate": False},
                           coupling={"activate": False})
    check_config(weights_only, sizes=SIZES, untokenized={"m": {2: "/ckpt/2"}})


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


# -- 7. a failed save of an untrained twin ------------------------------------------------------------


def test_a_full_disk_while_saving_a_twin_leaves_no_temporary_directory(tmp_path, monkeypatch):
    import transformers as T
    from tiny_families import tiny_model

    from crosslayer.models.untrained import build_untrained

    tiny_model("gpt_neox", eager=False).save_pretrained(tmp_path / "source")
    (tmp_path / "source" / "tokenizer.json").write_text("{}")
    real_save = T.PreTrainedModel.save_pretrained

    def save_then_fill_the_disk(self, directory, *args, **kwargs):
        real_save(self, directory, *args, **kwargs)  # the partial twin is on disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(T.PreTrainedModel, "save_pretrained", save_then_fill_the_disk)
    with pytest.raises(CheckpointError, match=r"model 'tw' revision 'init' file '.*/tw': cannot save the untrained "
                                              r"twin: \[Errno 28\] No space left on device"):
        build_untrained(tmp_path / "source", tmp_path / "tw", seed=0, model="tw")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source"]  # neither tw.tmp/ nor tw/

    def save_then_interrupt(self, directory, *args, **kwargs):
        real_save(self, directory, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(T.PreTrainedModel, "save_pretrained", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        build_untrained(tmp_path / "source", tmp_path / "tw", seed=0, model="tw")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source"]


# -- 8. a damaged .npz input ------------------------------------------------------------------------------


def damaged(path, how):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # a flipped byte in the middle of the first array's data
        flipped = bytearray(data)
        flipped[200] ^= 0xFF
        path.write_bytes(bytes(flipped))
    return path


def assert_names_the_file_and_the_fix(error, path):
    message = str(error)
    assert message.startswith(f"{path} is truncated or corrupt (")
    assert "delete it and run snakemake again" in message and f"snakemake --force {path}" in message


@pytest.mark.parametrize("how", ["truncated", "empty", "flipped"])
def test_a_damaged_npz_names_the_file_and_how_to_remake_it(tmp_path, how):
    path = tmp_path / "step8.jacobians.npz"
    np.savez(path, mean=np.arange(400.0).reshape(4, 10, 10), step=8)
    assert load_npz(path, ["step"])["step"] == 8
    with open_npz(path) as arrays:
        assert arrays.files == ["mean", "step"] and "mean" in arrays and dict(arrays).keys() == {"mean", "step"}
        with pytest.raises(KeyError, match=re.escape(f"{path} holds no array 'nope'")):
            arrays["nope"]
    damaged(path, how)
    with pytest.raises(CorruptFileError) as caught:
        with open_npz(path) as arrays:
            arrays["mean"]
    assert_names_the_file_and_the_fix(caught.value, path)


def test_the_library_reads_npz_inputs_through_the_helper(tmp_path):
    # the tables that read other jobs' npz files: a damaged one is named, not a bare BadZipFile
    from crosslayer.alignment.tables import load_alignment
    from crosslayer.coupling.tables import load_checkpoint

    for function, args in ((load_alignment, ([8],)), (load_checkpoint, ())):
        path = tmp_path / f"{function.__name__}.npz"
        np.savez(path, step=8, d_model=4, k=1, overlap_left=np.eye(2))
        damaged(path, "truncated")
        with pytest.raises(CorruptFileError) as caught:
            function([path] if args else path, *args)
        assert_names_the_file_and_the_fix(caught.value, path)


def test_no_script_or_library_module_loads_an_npz_itself():
    # every .npz a job reads goes through crosslayer.npz (np.load stays only for the corpus' .npy)
    sources = [*(ROOT / "workflow" / "crosslayer").rglob("*.py"), *(ROOT / "workflow" / "scripts").glob("*.py")]
    direct = {p.relative_to(ROOT).as_posix() for p in sources if p.name != "npz.py" and "np.load(" in p.read_text()}
    assert direct == {"workflow/crosslayer/models/train.py"}, direct


# -- 9. the README's promise of identical bytes ---------------------------------------------------------


def test_the_readme_excepts_the_report_from_the_same_bytes_promise():
    readme = (ROOT / "README.md").read_text()
    bullet = next(b for b in readme.split("\n* ") if b.startswith("Reproducible:"))
    bullet = " ".join(bullet.split())
    assert "same bytes in every file under `results/` that the workflow's jobs write" in bullet
    assert "not in `results/report.html`, which `snakemake --report`" in bullet and "run time" in bullet
    makefile = (ROOT / "Makefile").read_text()
    assert "--report results/report.html" in makefile  # the file the exception names is the one make run writes
