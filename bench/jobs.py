"""Where a workflow run's job-seconds go: per rule, the jobs' seconds from Snakemake's
``benchmark:`` files next to the seconds a fresh interpreter takes to import what the rule's
script imports (part of its fixed cost per job, paid before any computation). With the benchmarks
of a run of the reduced test config beside them, whose jobs are almost all fixed cost (interpreter,
Snakemake's preamble, every import including those made on first use, such as a model's class),
also each rule's computation: the floor no way of starting jobs can go below."""

import ast
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "workflow" / "scripts"


def _script_of_rules():
    """rule name -> script stem, from the `script:` lines of workflow/rules/*.smk."""
    mapping = {}
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        rule = None
        for line in smk.read_text().splitlines():
            if line.startswith("rule ") and line.rstrip().endswith(":"):
                rule = line.split()[1].rstrip(":")
            elif rule and line.strip().startswith('"../scripts/'):
                mapping[rule] = Path(line.strip().strip('"')).stem
    return mapping


def import_seconds(script, *, repeat=2):
    """Median wall seconds of a fresh ``python -c`` that runs only the script's top-level imports
    (interpreter start included, the log-redirecting ``_setup`` left out)."""
    tree = ast.parse((SCRIPTS / f"{script}.py").read_text())
    imports = [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
               and not (isinstance(node, ast.ImportFrom) and node.module == "_setup")]
    code = f"import sys; sys.path[:0] = [{str(ROOT / 'workflow')!r}]\n" + "\n".join(imports)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def job_seconds(benchmarks):
    """rule -> list of job seconds, from ``benchmarks/<rule>[/...].tsv`` of one run."""
    seconds = defaultdict(list)
    for path in Path(benchmarks).rglob("*.tsv"):
        rule = path.relative_to(benchmarks).parts[0].removesuffix(".tsv")
        seconds[rule].extend(pd.read_csv(path, sep="\t")["s"].tolist())
    return seconds


def bench_jobs(benchmarks="benchmarks", fixed_from=None):
    """Print, per rule: jobs, job-seconds, seconds per job, import seconds per job, and the
    share of the rule's job-seconds that is imports; totals at the bottom. `fixed_from`: the
    benchmarks/ directory of a run of tests/configs/tiny.yaml; its seconds per job, at most the
    rule's own, are taken as the rule's fixed cost per job (``fixed_s``), and the rest of its
    job-seconds as computation (``compute_s``)."""
    seconds, scripts = job_seconds(benchmarks), _script_of_rules()
    if not seconds:
        raise SystemExit(f"no benchmark files under {benchmarks}: run the workflow first")
    rows = []
    for rule, values in seconds.items():
        script = scripts.get(rule)
        imp = import_seconds(script) if script and (SCRIPTS / f"{script}.py").is_file() else float("nan")
        rows.append({"rule": rule, "jobs": len(values), "job_s": sum(values), "s_per_job": sum(values) / len(values),
                     "import_s": imp, "imports_total": imp * len(values)})
    table = pd.DataFrame(rows).sort_values("job_s", ascending=False)
    table["import_share"] = table["imports_total"] / table["job_s"]
    if fixed_from is not None:
        fixed = {rule: statistics.median(values) for rule, values in job_seconds(fixed_from).items()}
        per_job = table["rule"].map(fixed).fillna(0.0).clip(upper=table["s_per_job"])
        table["fixed_s"], table["compute_s"] = per_job, table["job_s"] - per_job * table["jobs"]
    print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    total, imports = table["job_s"].sum(), table["imports_total"].sum()
    print(f"\n{table['jobs'].sum()} jobs, {total:.0f} job-s, of which imports {imports:.0f} job-s "
          f"({imports / total:.0%}); on 2 cores the workflow's wall time is about job-s / 2")
    if fixed_from is not None:
        compute = table["compute_s"].sum()
        print(f"fixed cost {total - compute:.0f} job-s (the reduced run's seconds per job), computation "
              f"{compute:.0f} job-s: on 2 cores no less than {compute / 2:.0f} s of wall time however jobs start")
    return table
