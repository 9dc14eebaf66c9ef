"""A run's verdict table, published numbers, per-paper readings, the verdict matrix and the
report's first page, on a small catalogue and tables with planted effects."""

import base64

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from crosslayer.claims.catalogue import CatalogueError, parse_catalogue
from crosslayer.claims.figures import VERDICT_COLORS, verdicts_figure
from crosslayer.claims.report import figure_file, report_text
from crosslayer.claims.verdicts import ALL_MODELS, published_table, readings, verdict_table

TABLES = {"t": {"source": "s", "columns": ["model", "step", "unit", "y"]},
          "models": {"source": "s", "columns": ["model", "gated"]}}
RISE = {"id": "999-rise", "section": "2", "quote": "it rises", "kind": "change", "table": "t", "column": "y",
        "unit": {"column": "unit", "name": "layers"}, "before": {"step": 0}, "after": {"step": "last"},
        "statistic": "mean_difference", "direction": ">", "figure": "alignment/adjacent_mean"}
CATALOGUE = parse_catalogue({
    "paper": "999", "title": "A paper", "tables": TABLES,
    "claims": [
        RISE,
        {**RISE, "id": "999-gated-rise", "applies_to": {"gated": True}, "figure": "coupling/vs_score"},
        {**RISE, "id": "999-gated-more", "kind": "contrast", "statistic": "difference_of_means",
         "groups": {"by": "gated", "a": True, "b": False, "names": ["gated", "plain"]}},
        {"id": "999-beyond", "section": "5", "quote": "heads emerge", "testable": False, "why": "no heads here"},
    ],
    "published": [{"model": "a", "section": "Table 1", "quantity": "y at the last step", "value": 1.5, "table": "t",
                   "column": "y", "at": {"step": "last"}},
                  {"model": "b", "section": "Table 1", "quantity": "y at step 3", "value": 1.0, "table": "t",
                   "column": "y", "at": {"step": 3}},
                  {"model": "elsewhere", "section": "Table 1", "quantity": "y", "value": 2.0, "table": "t",
                   "column": "y"}],
}, source="999.yaml")


def tables(rise_a=1.0, rise_b=-1.0):
    """Model a (gated) rises by `rise_a` from step 0 to 9 on 12 layers, model b (plain) by `rise_b`."""
    rng = np.random.default_rng(0)
    rows = [pd.DataFrame({"model": m, "step": step, "unit": np.arange(12),
                          "y": (rise if step else 0.0) + rng.normal(scale=0.1, size=12)})
            for m, rise in (("a", rise_a), ("b", rise_b)) for step in (0, 9)]
    return {"t": pd.concat(rows, ignore_index=True), "models": pd.DataFrame({"model": ["a", "b"], "gated": [True, False]})}


def test_a_verdict_per_claim_and_model_groups_once_and_claims_beyond_the_tables_once():
    table = verdict_table([CATALOGUE], tables(), {"t": ["a", "b"]}, n_boot=300)
    got = {(r.claim, r.subject): r.verdict for r in table.itertuples()}
    assert got == {("999-rise", "a"): "holds", ("999-rise", "b"): "contradicted",
                   ("999-gated-rise", "a"): "holds",  # b is not gated: the claim is not about it
                   ("999-gated-more", "gated vs plain"): "holds", ("999-beyond", ALL_MODELS): "not testable"}
    assert list(table["scope"]) == ["model", "model", "model", "group", ""]
    assert table.loc[0, "n"] == 12 and table.loc[0, "low"] > 0.5


def test_a_model_whose_rows_are_missing_is_not_testable_and_says_why():
    data = tables()
    data["t"] = data["t"][data["t"]["model"] == "a"]
    table = verdict_table([CATALOGUE], data, {"t": ["a", "b"]}, n_boot=300)
    row = table[(table["claim"] == "999-rise") & (table["subject"] == "b")].iloc[0]
    assert row.verdict == "not testable" and row.reason == "t has no rows"
    none = verdict_table([CATALOGUE], {}, {"t": []}, n_boot=300)
    assert set(none["subject"]) == {ALL_MODELS, "gated vs plain"} and set(none["verdict"]) == {"not testable"}


def test_the_same_inputs_give_the_same_table_whatever_the_seed_of_permutations_it_needs_not():
    first = verdict_table([CATALOGUE], tables(), {"t": ["a", "b"]}, n_boot=300, seed=0)
    pd.testing.assert_frame_equal(first, verdict_table([CATALOGUE], tables(), {"t": ["a", "b"]}, n_boot=300, seed=0))
    # Student's t draws nothing: the seed orders only permutation tests over more than 8 units
    other = verdict_table([CATALOGUE], tables(), {"t": ["a", "b"]}, n_boot=300, seed=1)
    pd.testing.assert_frame_equal(first, other)


def test_published_numbers_beside_ours_for_the_runs_models():
    data = tables()
    table = published_table([CATALOGUE], data).set_index("model")
    last = data["t"].query("model == 'a' and step == 9")["y"].mean()
    assert list(table.index) == ["a", "b"]  # "elsewhere" is not a model of this run
    assert table.loc["a", "ours"] == pytest.approx(last) and table.loc["a", "rows"] == 12
    assert table.loc["a", "difference"] == pytest.approx(last - 1.5)
    assert np.isnan(table.loc["b", "ours"]) and table.loc["b", "missing"]


def test_one_reading_per_paper_names_each_claims_outcome():
    table = verdict_table([CATALOGUE], tables(), {"t": ["a", "b"]}, n_boot=300)
    line = readings(table, [CATALOGUE])["999"]
    # contradicted on any model outweighs holding on another
    assert line == "4 claims: holds 2 (gated-rise, gated-more); contradicted 1 (rise); not testable 1 (beyond)"


def test_the_matrix_colours_each_cell_by_its_verdict():
    table = verdict_table([CATALOGUE], tables(), {"t": ["a", "b"]}, n_boot=300)
    fig = verdicts_figure(table)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "across models"]
    assert [t.get_text() for t in ax.get_yticklabels()][2] == "999-gated-more (gated vs plain)"
    image = ax.get_images()[0]
    grid, rgba = image.get_array(), image.to_rgba(image.get_array())
    assert grid.mask[1, 1] and grid.mask[0, 2]  # b for a gated claim; a model claim across models
    hex_of = lambda c: "#%02x%02x%02x" % tuple(round(255 * v) for v in c[:3])  # noqa: E731
    assert hex_of(rgba[0, 0]) == VERDICT_COLORS["holds"] and hex_of(rgba[0, 1]) == VERDICT_COLORS["contradicted"]
    assert all(hex_of(rgba[3, j]) == VERDICT_COLORS["not testable"] for j in range(3))  # beyond: every column
    plt.close(fig)


def test_the_matrix_title_fits_the_figure_however_narrow():
    # two models and beyond-scope marks: the title's second sentence ran off the right edge
    table = verdict_table([CATALOGUE], tables(), {"t": ["a", "b"]}, n_boot=300).assign(in_paper_scope=False)
    fig = verdicts_figure(table)
    fig.canvas.draw()
    title, frame = fig.axes[0].title.get_window_extent(), fig.bbox
    assert "*: beyond the paper's scope" in fig.axes[0].get_title(loc="left").replace("\n", " ")
    assert frame.x0 <= title.x0 and title.x1 <= frame.x1 and title.y1 <= frame.y1, (title, frame)
    plt.close(fig)


def test_the_first_page_embeds_the_matrix_and_links_each_verdict_to_its_figure(tmp_path):
    png = tmp_path / "m.png"
    png.write_bytes(b"\x89PNG fake")
    table = verdict_table([CATALOGUE], tables(), {"t": ["a", "b"]}, n_boot=300)
    text = report_text(table, [CATALOGUE], png, "The workflow's own description.")
    joined = "".join(line.strip() for line in text.splitlines())
    assert base64.b64encode(b"\x89PNG fake").decode() in joined
    assert "* **999** (A paper): 4 claims: holds 2" in text
    assert "a: `holds <a.adjacent_mean.png_>`__; b: `contradicted <b.adjacent_mean.png_>`__" in text
    assert "gated vs plain: `holds <adjacent_mean_all_models.png_>`__" in text  # a group: the all-models figure
    assert "all models: not testable\n" in text  # no figure named for that claim
    assert "a: `holds <all_models.vs_score.png_>`__" in text  # coupling has no per-model vs_score
    assert text.endswith("The workflow's own description.\n")  # one final newline, with or without its own
    assert text == report_text(table, [CATALOGUE], png, "The workflow's own description.\n")
    assert max(len(line) for line in text.splitlines()) < 1000  # docutils refuses long lines
    # a per-model claim that no model's files could test has no model's figure to link
    untested = table[table.subject == "a"].head(1).assign(subject=ALL_MODELS, verdict="not testable")
    text = report_text(pd.concat([table, untested]), [CATALOGUE], png, "")
    assert f"{ALL_MODELS}: not testable" in text and f"{ALL_MODELS}.adjacent_mean.png" not in text


def test_figure_files_are_the_reports_link_targets():
    assert figure_file("alignment/adjacent_mean", "m") == "m.adjacent_mean.png"
    assert figure_file("alignment/adjacent_mean", None) == "adjacent_mean_all_models.png"
    assert figure_file("alignment/pairwise", None) is None and figure_file("", "m") is None


# -- whom a verdict is about: the paper's own models, and which checkpoint is untrained -----------------

SCOPED = parse_catalogue({
    "paper": "999", "title": "A paper", "tables": TABLES,
    "paper_models": {"big": "org/big-model", "other": "org/other-model"},
    "claims": [{**RISE, "stated_for": ["big"]}, {**RISE, "id": "999-anywhere", "stated_for": []}],
}, source="999.yaml")


def scoped_tables():
    data = tables(rise_a=1.0, rise_b=1.0)
    data["models"] = data["models"].assign(repo=["org/big-model", None])
    return data


def test_a_verdict_beyond_the_papers_models_is_kept_and_says_so():
    table = verdict_table([SCOPED], scoped_tables(), {"t": ["a", "b"]}, n_boot=300)
    rows = {(r.claim, r.subject): r for r in table.itertuples()}
    assert rows[("999-rise", "a")].in_paper_scope and rows[("999-rise", "a")].verdict == "holds"
    b = rows[("999-rise", "b")]
    assert not b.in_paper_scope and b.verdict == "holds"  # the user's own model keeps its verdict
    assert b.reason.startswith("beyond the paper's scope (b is not among the models it is stated for: big-model)")
    assert rows[("999-anywhere", "b")].in_paper_scope  # stated of every model


def test_the_papers_line_reads_its_own_models_when_the_run_has_them():
    data = scoped_tables()
    data["t"].loc[(data["t"]["model"] == "b") & (data["t"]["step"] == 9), "y"] -= 2  # b falls
    table = verdict_table([SCOPED], data, {"t": ["a", "b"]}, n_boot=300)
    line = readings(table, [SCOPED])["999"]
    assert line == "2 claims (on the paper's own models): holds 1 (rise); contradicted 1 (anywhere)"
    alone = verdict_table([SCOPED], {**data, "models": data["models"].assign(repo=None)}, {"t": ["a", "b"]},
                          n_boot=300)
    assert "(on this run's models: none is one the paper states its claims for)" in readings(alone, [SCOPED])["999"]


def test_which_checkpoint_is_untrained_comes_from_the_config():
    from crosslayer.claims.subjects import model_identities
    from crosslayer.config import check_model_entries

    models = {
        "trained": {"source": "train", "arch": "gpt2", "train": {}, "steps": [0, 10]},
        "twin": {"source": "hub", "repo": "org/m", "revision": "step{step}", "steps": [100], "init": {"seed": 0}},
        "released": {"source": "hub", "repo": "EleutherAI/pythia-1b", "revision": "step{step}", "steps": [0, 512],
                     "untrained_step": 0},
        "mine": {"source": "local", "checkpoints": {0: "/data/run/final"}},  # a trained model filed at step 0
    }
    got = model_identities(models)
    assert {m: v["untrained_step"] for m, v in got.items()} == {"trained": 0, "twin": 0, "released": 0, "mine": None}
    assert got["released"]["repo"] == "EleutherAI/pythia-1b" and got["mine"]["repo"] is None
    with pytest.raises(ValueError, match=r"models.bad.untrained_step: 5 is not one of the model's steps \[0, 512\]"):
        check_model_entries({"models": {"bad": {**models["released"], "untrained_step": 5}}})
    with pytest.raises(ValueError, match="init makes step 0 the untrained twin"):
        check_model_entries({"models": {"bad": {**models["twin"], "untrained_step": 100}}})


def test_a_claim_judged_only_on_other_models_says_so_in_the_papers_line():
    data = scoped_tables()
    data["t"] = data["t"][data["t"]["model"] == "b"]  # only the user's model has the rise claim's rows...
    both = {**data, "t2": data["t"]}
    catalogue = parse_catalogue({
        "paper": "999", "title": "A paper", "tables": {**TABLES, "t2": TABLES["t"]},
        "paper_models": {"big": "org/big-model"},
        "claims": [{**RISE, "stated_for": ["big"]}, {**RISE, "id": "999-t2", "table": "t2"}],
    }, source="999.yaml")
    scoped = scoped_tables()
    both["t2"] = scoped["t"][scoped["t"]["model"] == "a"]  # ...and the paper's model another claim's
    table = verdict_table([catalogue], both, {"t": ["b"], "t2": ["a"]}, n_boot=300)
    assert readings(table, [catalogue])["999"] == (
        "2 claims (on the paper's own models): holds 1 (t2); only on other models 1 (rise)")


def test_a_paper_none_of_whose_claims_a_run_can_test_gets_its_line():
    # every verdict "not testable": no tested row to read the scope of (pandas' string columns)
    data = {"models": pd.DataFrame({"model": ["a"], "gated": [True], "repo": [None]})}
    table = verdict_table([SCOPED], data, {"t": ["a"]}, n_boot=300)
    table = table.astype({"claim": "string[pyarrow]", "verdict": "string[pyarrow]"})
    assert readings(table, [SCOPED])["999"] == "2 claims: not testable 2 (rise, anywhere)"


BUDGETED = parse_catalogue({
    "paper": "999", "title": "A paper", "tables": {**TABLES, "t": {"source": "s",
                                                                "columns": ["model", "step", "unit", "y", "steps"]}},
    "claims": [{**RISE, "stated_for": []}],
    "budgets": {"t": {"column": "steps", "value": 1000, "cite": "Section 4: 1,000 steps"}},
}, source="999.yaml")


@pytest.mark.parametrize("trained, beyond", [(99, True), (100, False), (1000, False)])
def test_the_papers_own_experiment_below_a_tenth_of_its_budget_is_beyond_its_scope(trained, beyond):
    data = tables(rise_a=1.0, rise_b=1.0)
    data["t"] = data["t"].assign(steps=trained)
    table = verdict_table([BUDGETED], data, {"t": ["a", "b"]}, n_boot=300)
    assert set(table["verdict"]) == {"holds"}  # the verdict is kept, its scope said
    assert (~table["in_paper_scope"]).all() == beyond and set(table["out_of_scope"]) == {"budget" if beyond else ""}
    line = readings(table, [BUDGETED])["999"]
    if beyond:
        assert table.loc[0, "reason"].startswith(f"beyond the paper's scope (trained {trained} steps per run, 9.9% of "
                                                 "the paper's 1,000 (Section 4: 1,000 steps): below a tenth")
        assert line == "1 claims: below the paper's budget 1 (rise)"
    else:
        assert line == "1 claims: holds 1 (rise)"


def test_a_budget_names_a_declared_table_and_column():
    document = {"paper": "999", "title": "A paper", "tables": TABLES, "claims": [RISE]}
    for budgets in ({"t": {"column": "nothing", "value": 1, "cite": "x"}}, {"u": {"column": "y", "value": 1, "cite": "x"}},
                    {"t": {"column": "y", "value": "many", "cite": "x"}}):
        with pytest.raises(CatalogueError, match="budgets maps a declared table"):
            parse_catalogue({**document, "budgets": budgets}, source="999.yaml")
