"""The job benchmark (bench/jobs.py): each rule's benchmark files summed and its script's imports
timed."""


def test_bench_jobs_sums_each_rules_benchmark_files_and_times_its_scripts_imports(tmp_path, capsys):
    from bench.jobs import _script_of_rules, bench_jobs

    assert _script_of_rules()["block_jacobians"] == "block_jacobians"
    assert _script_of_rules()["plot_across_papers_models"] == "plot_across_papers_models"
    (tmp_path / "register_checkpoint" / "m").mkdir(parents=True)
    for step, s in ((0, 0.25), (1, 0.5)):
        (tmp_path / "register_checkpoint" / "m" / f"step{step}.tsv").write_text(f"s\th:m:s\n{s}\t0:00:00\n")
    (tmp_path / "alignment_table.tsv").write_text("s\th:m:s\n2.0\t0:00:02\n")
    table = bench_jobs(tmp_path).set_index("rule")
    assert table.loc["register_checkpoint", "jobs"] == 2 and table.loc["register_checkpoint", "job_s"] == 0.75
    assert table.loc["alignment_table", "job_s"] == 2.0
    assert (table["import_s"] > 0).all()
    assert "3 jobs, 3 job-s" in capsys.readouterr().out
