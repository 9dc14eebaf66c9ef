"""coupling.scores read strictly (crosslayer.score_file): one row per model, no column it would ignore,
the checkpoint a row states held against the coupling's last; every refusal names the file and line."""

import pytest

from crosslayer.config import check_config, scored_checkpoints
from crosslayer.score_file import MAX_SCORES_BYTES, read_scores


def scores(tmp_path, text):
    path = tmp_path / "scores.csv"
    path.write_text(text)
    return path


def test_errors_name_the_file_line_and_model(tmp_path):
    path = scores(tmp_path, "model,score\na,41.5\nb,n/a\nc,12\n")
    with pytest.raises(ValueError, match=r"line 3: score 'n/a' of model 'b' is not a number"):
        read_scores(path, models=["a", "b"])
    assert read_scores(path, models=["a", "c"]) == {"a": 41.5, "c": 12.0}
    with pytest.raises(ValueError, match=r"no score for model\(s\) \['d'\]"):
        read_scores(path, models=["a", "d"])
    with pytest.raises(ValueError, match="columns model,score"):
        read_scores(scores(tmp_path, "name,value\na,1\n"), models=["a"])
    with pytest.raises(ValueError, match="cannot read"):
        read_scores(tmp_path / "missing.csv", models=["a"])


def test_a_model_given_twice_is_refused_not_the_last_row_taken(tmp_path):
    # the probe: tiny-gelu 0.4 and 0.9 gave 0.9 in models.tsv
    path = scores(tmp_path, "model,score\ntiny-gelu,0.4\ntiny-swiglu,0.5\ntiny-gelu,0.9\n")
    with pytest.raises(ValueError, match=r"^coupling\.scores: .*scores\.csv lines 2 and 4 both give model 'tiny-gelu': "
                                         "keep one row per model"):
        read_scores(path, models=["tiny-gelu", "tiny-swiglu"])
    # a model not configured, twice, is as ambiguous
    with pytest.raises(ValueError, match="lines 3 and 4 both give model 'other'"):
        read_scores(scores(tmp_path, "model,score\na,1\nother,2\nother,3\n"), models=["a"])


@pytest.mark.parametrize("header, row", [("model,score,task", "a,1,mmlu"), ("model,score,n_shots", "a,1,5"),
                                         ("model,score,Step", "a,1,16")])
def test_a_column_it_would_ignore_is_refused_by_name(tmp_path, header, row):
    extra = header.split(",")[-1]
    with pytest.raises(ValueError, match=rf"column\(s\) \['{extra}'\] are not model, score, step or revision"):
        read_scores(scores(tmp_path, f"{header}\n{row}\n"), models=["a"])


def test_a_column_named_twice_and_a_short_row_are_refused(tmp_path):
    with pytest.raises(ValueError, match="a column is named twice"):
        read_scores(scores(tmp_path, "model,score,score\na,1,2\n"), models=["a"])
    with pytest.raises(ValueError, match="line 3: 1 cells under a header of 2 columns"):
        read_scores(scores(tmp_path, "model,score\na,1\nb\n"), models=["a", "b"])


def test_the_step_a_row_states_must_be_the_couplings_last(tmp_path):
    path = scores(tmp_path, "model,score,step\na,0.4,8\nb,0.5,16\n")
    last = {"a": [16, None], "b": [16, None]}
    with pytest.raises(ValueError, match=r"line 2: model 'a' was scored at step 8, but its coupling is measured at "
                                         r"its last checkpoint, step 16"):
        read_scores(path, models=["a", "b"], checkpoints=last)
    assert read_scores(path, models=["b"], checkpoints=last) == {"b": 0.5}  # a is not configured: ignored
    with pytest.raises(ValueError, match=r"line 2: step '' of model 'a' is not an integer"):
        read_scores(scores(tmp_path, "model,score,step\na,0.4,\n"), models=["a"], checkpoints=last)


def test_the_revision_a_row_states_must_be_the_couplings_last(tmp_path):
    path = scores(tmp_path, "model,score,revision\nhub,0.4,step1000\nlocal,0.5,\n")
    last = {"hub": [143000, "step143000"], "local": [16, None]}
    with pytest.raises(ValueError, match=r"line 2: model 'hub' was scored at revision 'step1000', but .* revision "
                                         r"'step143000'"):
        read_scores(path, models=["hub", "local"], checkpoints=last)
    path = scores(tmp_path, "model,score,revision\nhub,0.4,step143000\nlocal,0.5,main\n")
    with pytest.raises(ValueError, match=r"line 3: model 'local' is not read from the hub, so it has no revision"):
        read_scores(path, models=["hub", "local"], checkpoints=last)
    path = scores(tmp_path, "model,score,revision,step\nhub,0.4,step143000,143000\nlocal,0.5,,16\n")
    assert read_scores(path, models=["hub", "local"], checkpoints=last) == {"hub": 0.4, "local": 0.5}


def test_a_huge_file_is_refused_by_its_size_and_long_cells_are_cut(tmp_path):
    path = tmp_path / "big.csv"
    path.write_bytes(b"model,score\n" + b"a" * (MAX_SCORES_BYTES + 1) + b",1\n")
    with pytest.raises(ValueError, match=r"big\.csv is 4,194,320 bytes, more than"):
        read_scores(path, models=["a"])
    with pytest.raises(ValueError) as refused:
        read_scores(scores(tmp_path, "model,score\na," + "9x" * 25_000 + "\n"), models=["a"])
    assert len(str(refused.value)) < 400 and "... (50,002 characters)" in str(refused.value)


def test_the_checkpoint_is_the_last_step_and_a_hub_models_revision(tmp_path):
    from test_config import config_with

    config = config_with()
    config["models"]["h"] = {"source": "hub", "repo": "org/r", "revision": "step{step}", "steps": [10, 200],
                             "init": {"seed": 0}}
    assert scored_checkpoints(config) == {"m": [100, None], "h": [200, "step200"]}
    config["coupling"]["scores"] = str(scores(tmp_path, "model,score,step\nm,1,100\nh,2,10\n"))
    with pytest.raises(ValueError, match=r"^coupling\.scores: .* line 3: model 'h' was scored at step 10, but .* "
                                         "step 200"):
        check_config(config)


def test_excels_csv_utf8_with_its_byte_order_mark_is_read(tmp_path):
    # Excel's "CSV UTF-8" starts with U+FEFF: it was refused, showing the header as ['\ufeffmodel', 'score']
    path = tmp_path / "scores.csv"
    path.write_bytes("model,score\r\na,41.5\r\n".encode("utf-8-sig"))
    assert read_scores(path, models=["a"]) == {"a": 41.5}
