"""The across-papers measures and their legend (crosslayer.across.catalog)."""

import pandas as pd

from crosslayer.across.catalog import catalog, from_legend, legend


def test_the_legend_names_every_measure_and_reads_back_as_the_same_measures(tmp_path):
    measures = catalog(projections=["q", "gate"], Ks=[10], metric="released_l2", community_method="infomap")
    table = legend(measures, present={"alignment_output", "coupling_K10_fwd"})
    table.to_csv(tmp_path / "measures.tsv", sep="\t", index=False)
    back = pd.read_csv(tmp_path / "measures.tsv", sep="\t", dtype={"paper": str})
    assert from_legend(back) == measures and back["present"].sum() == 2
    assert list(back.set_index("measure").loc[["alignment_input", "coupling_K10_bwd", "community_nmi"], "paper"]) == [
        "000", "002", "004"]
    assert "no random baseline" in back.set_index("measure").loc["coupling_K10_fwd", "baseline"]
    assert back.set_index("measure").loc["coupling_K10_fwd", "ratio"] == "baseline / value"
