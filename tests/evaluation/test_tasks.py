"""Benchmark task names checked before any job against the real harness's index and include_path;
a task file that does not parse is named with its YAML error (the harness skips it silently)."""

import pytest

from crosslayer.evaluation.tasks import check_task_names, unparsable_task_files

pytest.importorskip("lm_eval", reason="the [eval] extra (make test installs it)")

GOOD = """task: toy_words
dataset_path: json
output_type: multiple_choice
process_docs: !function utils.process_docs
doc_to_text: "{{question}}"
doc_to_choice: "{{choices}}"
doc_to_target: label
"""
BROKEN = """task: toy_numbers
dataset_path: json
doc_to_text: "{{question}}
  doc_to_target: label: 3
"""


@pytest.fixture
def include(tmp_path):
    (tmp_path / "toy_words.yaml").write_text(GOOD)
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "toy_numbers.yaml").write_text(BROKEN)
    return tmp_path


def test_a_file_that_does_not_parse_is_named_with_its_error_and_tags_are_no_error(include):
    broken = unparsable_task_files(include)
    assert [path.name for path, _ in broken] == ["toy_numbers.yaml"]  # !function parses
    assert "while scanning a quoted scalar" in broken[0][1] or "mapping values" in broken[0][1]


def test_an_unknown_task_is_refused_naming_the_key_and_the_broken_files(include):
    check_task_names(["toy_words"], include_path=str(include), builtin=False)  # the harness indexes it
    with pytest.raises(ValueError, match=r"^benchmarks\.tasks: \['toy_numbers'\] are not tasks of "
                                         r"benchmarks\.include_path \(.*\): check the names .*; these task files do "
                                         r"not parse, so their tasks are missing:\n  .*more/toy_numbers\.yaml: "):
        check_task_names(["toy_words", "toy_numbers"], include_path=str(include), builtin=False)
    (include / "more" / "toy_numbers.yaml").unlink()
    with pytest.raises(ValueError, match=r"\['toy_numbers'\] are not tasks of benchmarks\.include_path \([^)]*\): "
                                         r"check the names \(lm-eval ls tasks lists them\)$"):
        check_task_names(["toy_numbers"], include_path=str(include), builtin=False)


def test_the_harness_own_names_count_with_builtin():
    check_task_names(["hellaswag"], known={"hellaswag", "arc_challenge"})
    with pytest.raises(ValueError, match=r"\['hellaswg'\] are not tasks of the harness's own \(2 names\)"):
        check_task_names(["hellaswag", "hellaswg"], known={"hellaswag", "arc_challenge"})
