"""Per-step conda envs stay honest: conda cannot run here, so check statically that every rule
names an env file that exists and parses, and that every third-party module its script imports
(directly or through the crosslayer library, followed transitively) is listed in that env.
Snakemake's script preamble exposes the host's sys.path, so a run would not notice a gap."""

import ast
import functools
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
# import name -> conda-forge package name, where they differ
CONDA_NAME = {"torch": "pytorch", "yaml": "pyyaml", "matplotlib": "matplotlib-base", "httpx2": "huggingface_hub",
              "igraph": "python-igraph"}
LOCAL = {"crosslayer", "_setup"}


def rule_blocks():
    """(rule name, {directive: first value}) for every rule in workflow/rules/*.smk."""
    for path in RULES:
        for match in re.finditer(r"^(?:local)?rule (\w+):\n((?:[ \t]+.*\n|\n)+)", path.read_text(), re.M):
            body = match[2]
            directives = dict(re.findall(r"^    (\w+):\s*\n\s+\"?([^\"\n]*)\"?", body, re.M))
            yield match[1], directives, path


RULE_BLOCKS = list(rule_blocks())


def test_rules_were_found():
    names = {name for name, _, _ in RULE_BLOCKS}
    assert {"train_model", "download_checkpoint", "mlp_alignment", "plot_alignment"} <= names


@pytest.mark.parametrize("name, directives, path", RULE_BLOCKS, ids=[r[0] for r in RULE_BLOCKS])
def test_rule_has_env_log_benchmark_and_script(name, directives, path):
    for directive in ("conda", "log", "benchmark", "script"):
        assert directive in directives, f"rule {name} in {path.name} has no {directive}:"
    env = (path.parent / directives["conda"]).resolve()
    assert env.is_file(), f"rule {name}: env file {env} does not exist"
    script = (path.parent / directives["script"]).resolve()
    assert script.is_file(), f"rule {name}: script {script} does not exist"


def env_packages(env_file):
    spec = yaml.safe_load(env_file.read_text())
    assert spec["channels"] == ["conda-forge", "nodefaults"], f"{env_file.name}: use conda-forge + nodefaults"
    packages = {}
    for dep in spec["dependencies"]:
        assert isinstance(dep, str) and re.fullmatch(r"[\w.-]+=[\w.]+", dep), f"{env_file.name}: pin {dep!r} with ="
        name, version = dep.split("=")
        packages[name] = version
    return packages


@pytest.mark.parametrize("env_file", sorted((ROOT / "envs").glob("*.yaml")), ids=lambda p: p.name)
def test_env_file_parses_and_pins(env_file):
    assert "python" in env_packages(env_file)


def imported_modules(path, seen=None, *, dotted=False):
    """Top-level names of every module `path` imports, following crosslayer and _setup imports into
    modules and packages (``a/b.py`` or ``a/b/__init__.py``), relative imports included; with
    `dotted`, the imported names in full (``crosslayer.models.loading``) as well."""
    seen = set() if seen is None else seen
    if path in seen:
        return set()
    seen.add(path)
    names = set()
    package = path.parent.relative_to(ROOT / "workflow").as_posix().replace("/", ".") if path.is_relative_to(
        ROOT / "workflow" / "crosslayer") else ""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing file's package
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            modules = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            names |= {top, module} if dotted else {top}
            if top not in LOCAL:
                continue
            stem = ROOT / "workflow" / ("scripts" if top == "_setup" else "") / module.replace(".", "/")
            for local in (stem.with_suffix(".py"), stem / "__init__.py"):
                if local.is_file():
                    names |= imported_modules(local, seen, dotted=dotted)
    return names


@pytest.mark.parametrize("name, directives, path", RULE_BLOCKS, ids=[r[0] for r in RULE_BLOCKS])
def test_every_third_party_import_is_in_the_rules_env(name, directives, path):
    packages = env_packages((path.parent / directives["conda"]).resolve())
    script = (path.parent / directives["script"]).resolve()
    third_party = imported_modules(script) - LOCAL - set(sys.stdlib_module_names)
    missing = {m for m in third_party if CONDA_NAME.get(m, m) not in packages}
    assert not missing, f"rule {name}: {script.name} imports {sorted(missing)}, not in {directives['conda']}"


@pytest.mark.parametrize("name, directives, path", RULE_BLOCKS, ids=[r[0] for r in RULE_BLOCKS])
def test_a_rule_that_loads_a_model_has_accelerate(name, directives, path):
    # load_model places a GPU job's weights with device_map, which transformers does through accelerate
    script = (path.parent / directives["conda"]).resolve(), (path.parent / directives["script"]).resolve()
    if "crosslayer.models.loading.load_model" in imported_modules(script[1], dotted=True):
        assert "accelerate" in env_packages(script[0]), f"rule {name} loads models: add accelerate to {script[0].name}"


def test_import_scan_follows_the_library():
    # mlp_alignment.py imports only numpy and torch itself; safetensors comes through crosslayer.models.weights
    found = imported_modules(ROOT / "workflow" / "scripts" / "mlp_alignment.py")
    assert {"numpy", "torch", "safetensors", "scipy", "transformers"} <= found


def test_import_scan_follows_packages_and_relative_imports(tmp_path, monkeypatch):
    # after a move into subpackages the scan must still reach every module a script uses
    root = tmp_path / "repo"
    package = root / "workflow" / "crosslayer" / "linalg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from .svd import top\n")
    (package / "svd.py").write_text("import scipy.linalg\nfrom ..other import x\n")
    (root / "workflow" / "crosslayer" / "other.py").write_text("import statsmodels\n")
    script = root / "workflow" / "scripts" / "s.py"
    script.parent.mkdir(parents=True)
    script.write_text("from crosslayer.linalg import top\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", root)
    assert {"scipy", "statsmodels"} <= imported_modules(script)



@functools.cache
def declared_distributions():
    """Normalised names of pyproject.toml's dependencies and optional dependencies (extras)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + [s for extra in project["optional-dependencies"].values() for s in extra]
    return {_normal(re.split(r"[\s\[<>=!~;@]", spec, maxsplit=1)[0]) for spec in specs}


@functools.cache
def installed_distributions():
    """Import name -> distributions providing it, from the installed metadata."""
    from importlib.metadata import packages_distributions

    return packages_distributions()


def _normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def undeclared(modules):
    """The third-party modules among `modules` whose distribution pyproject.toml does not declare
    itself (reached through another dependency's requirements does not count: httpx2 once came
    only through huggingface_hub). Import names map to distributions through the installed
    metadata (yaml -> PyYAML)."""
    distributions, declared = installed_distributions(), declared_distributions()
    third_party = set(modules) - LOCAL - set(sys.stdlib_module_names)
    return {m for m in third_party if not {_normal(d) for d in distributions.get(m, [m])} & declared}


def test_every_third_party_import_of_library_and_scripts_is_declared_in_pyproject():
    files = sorted((ROOT / "workflow" / "crosslayer").rglob("*.py")) + sorted((ROOT / "workflow" / "scripts").glob("*.py"))
    missing = {}
    for path in files:
        for module in undeclared(imported_modules(path, seen={p for p in files if p != path})):
            missing.setdefault(module, []).append(path.relative_to(ROOT).as_posix())
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_the_declaration_check_reports_an_undeclared_import(tmp_path):
    module = tmp_path / "x.py"
    module.write_text("import statsmodels\nimport yaml\nfrom igraph import Graph\nimport some_undeclared_thing\n")
    assert undeclared(imported_modules(module)) == {"some_undeclared_thing"}
