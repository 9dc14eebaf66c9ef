"""The job benchmark (bench/jobs.py): each rule's benchmark files summed, its script's imports
timed, and its seconds split into fixed cost and computation by a reduced run's."""


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


def test_bench_jobs_splits_each_rules_seconds_into_the_reduced_runs_fixed_cost_and_computation(tmp_path, capsys):
    from bench.jobs import bench_jobs

    run, reduced = tmp_path / "run", tmp_path / "reduced"
    for root, seconds in ((run, (3.0, 5.0)), (reduced, (0.5, 1.0, 2.0))):
        (root / "block_coupling" / "m").mkdir(parents=True)
        for step, s in enumerate(seconds):
            (root / "block_coupling" / "m" / f"step{step}.tsv").write_text(f"s\th:m:s\n{s}\t0:00:00\n")
    (run / "alignment_table.tsv").write_text("s\th:m:s\n2.0\t0:00:02\n")
    (reduced / "alignment_table.tsv").write_text("s\th:m:s\n5.0\t0:00:05\n")  # slower there: all of it fixed
    (run / "claims.tsv").write_text("s\th:m:s\n4.0\t0:00:04\n")  # absent from the reduced run: all computation
    table = bench_jobs(run, fixed_from=reduced).set_index("rule")
    assert table.loc["block_coupling", "fixed_s"] == 1.0 and table.loc["block_coupling", "compute_s"] == 6.0
    assert table.loc["alignment_table", "fixed_s"] == 2.0 and table.loc["alignment_table", "compute_s"] == 0.0
    assert table.loc["claims", "fixed_s"] == 0.0 and table.loc["claims", "compute_s"] == 4.0
    out = capsys.readouterr().out
    assert "fixed cost 4 job-s" in out and "computation 10 job-s" in out and "no less than 5 s" in out
