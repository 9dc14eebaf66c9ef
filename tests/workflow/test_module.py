"""The workflow used as a Snakemake module from a user's own Snakefile in another directory
(docs/module.md): from a checkout's path, and from a GitHub tag as snakedeploy writes it, served
offline from a bare clone of this working tree. It plans the jobs a direct run plans and writes the
same bytes."""

import shutil
import subprocess
import sys
import sysconfig

import pytest
from snakemake_runs import ROOT, TINY, planned_jobs, snakemake

pytestmark = pytest.mark.workflow

REPO, TAG = "someone/crosslayer", "v0.1.0"


def user_workflow(workdir, snakefile):
    """A user's directory: their Snakefile using this workflow as a module, and their config (a copy
    of tiny.yaml, which has no relative paths to adjust; its prompt file is the shipped default)."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TINY, workdir / "config.yaml")
    (workdir / "Snakefile").write_text(
        'configfile: "config.yaml"\n\n\n'
        "module crosslayer:\n"
        f"    snakefile: {snakefile}\n"
        "    config: config\n\n\n"
        "use rule * from crosslayer as crosslayer_*\n"
    )
    return workdir


def user_snakemake(workdir, *args, python=(sys.executable,), **kwargs):
    """Snakemake as the user runs it: on the Snakefile in `workdir`, from there."""
    return snakemake(workdir, *args, command=[*python, "-m", "snakemake"], cwd=workdir, **kwargs)


#: Python without site's .pth files, as where the crosslayer package is not installed (the venv's
#: editable install is one); site-packages stays importable through PYTHONPATH.
NO_INSTALL = {"python": (sys.executable, "-S"), "env": {"PYTHONPATH": sysconfig.get_paths()["purelib"]}}


def github_cache(cache_home):
    """Serve this working tree (its tracked and untracked, not ignored files) as github(REPO,
    tag=TAG) with no network: Snakemake 9 reads a GitHub module from a bare clone in its source
    cache, $XDG_CACHE_HOME/snakemake/snakemake/source-cache/snakemake-git-cache/github.com/<repo>,
    and fetches only when the tag or a file is missing there."""
    source = cache_home / "source"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is left out
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org", "-C", str(source)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "snapshot"], ["tag", TAG]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    clone = cache_home / "snakemake/snakemake/source-cache/snakemake-git-cache/github.com" / REPO
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(clone)], check=True, capture_output=True)
    return {"XDG_CACHE_HOME": str(cache_home)}


@pytest.fixture(scope="module")
def direct_plan(tmp_path_factory):
    """The jobs a direct run of tiny.yaml plans in an empty directory."""
    workdir = tmp_path_factory.mktemp("direct_plan")
    result = user_snakemake(workdir, "-n", "--snakefile", str(ROOT / "Snakefile"), "--configfile", str(TINY))
    return planned_jobs(result.output)


def test_a_module_from_a_path_plans_the_direct_runs_jobs_without_the_library_installed(tmp_path, direct_plan):
    # The library comes from the module's checkout, not the user's directory; the shipped prompt
    # file too (a MissingInputException otherwise); every rule under its new name.
    workdir = user_workflow(tmp_path / "user", f'"{ROOT / "Snakefile"}"')
    result = user_snakemake(workdir, "-n", **NO_INSTALL)
    assert planned_jobs(result.output, prefix="crosslayer_") == direct_plan
    assert direct_plan["all"] == 1 and len(direct_plan) > 40  # the default target is the module's rule all
    # localrules hold under the renaming (a `localrules:` list would name rules that no longer exist)
    assert "localrules directive specifies rules that are not present" not in result.output


def test_a_module_from_a_github_tag_writes_the_bytes_of_a_direct_run(tmp_path, direct_plan, request):
    # The whole run in another directory, through the module: every file under results/ (trained
    # weights, manifests, arrays, tables, graphs, PDF and PNG figures) byte for byte as the direct
    # run's, so this is also the check that a second run elsewhere writes the same bytes. Logs,
    # benchmarks (times) and the stat caches (mtimes, in .crosslayer/) lie outside results/.
    env = github_cache(tmp_path / "cache")
    workdir = user_workflow(tmp_path / "user", f'github("{REPO}", path="Snakefile", tag="{TAG}")')
    assert planned_jobs(user_snakemake(workdir, "-n", env=env).output, prefix="crosslayer_") == direct_plan

    user_snakemake(workdir, "--cores", "2", env=env)
    tiny_run = request.getfixturevalue("tiny_run")  # only now: under pytest-xdist another worker makes it meanwhile

    def results(root):
        return sorted(p.relative_to(root) for p in (root / "results").rglob("*")  # the report: another test's
                      if p.is_file() and p.name != "report.html")

    assert results(workdir) == results(tiny_run)
    differ = [str(p) for p in results(tiny_run) if (tiny_run / p).read_bytes() != (workdir / p).read_bytes()]
    assert not differ
    assert any(p.suffix == ".pdf" for p in results(tiny_run)) and any(p.suffix == ".gz" for p in results(tiny_run))


def test_a_module_from_a_github_tag_without_the_library_says_how_to_install_it(tmp_path):
    env = github_cache(tmp_path / "cache")
    workdir = user_workflow(tmp_path / "user", f'github("{REPO}", path="Snakefile", tag="{TAG}")')
    result = user_snakemake(workdir, "-n", python=NO_INSTALL["python"], env=env | NO_INSTALL["env"], check=False)
    assert result.returncode != 0
    assert "Cannot import the crosslayer library" in result.output and "pip install" in result.output
