"""Reading the validated workflow config: which checkpoints each model has, and checks that a
JSON schema cannot express. Standard library only, so the Snakefile can import it anywhere.

Errors are ``ValueError`` whose message starts with the config key, e.g.
``models.tiny-gelu.reference_step: 7 is not one of the model's steps [0, 10, 100]``.
"""

import os

from crosslayer.prompt_checks import check_prompt_settings
from crosslayer.score_file import read_scores
from crosslayer.stages import ANALYSES, STAGES, TOKENIZING_STAGES, stage, supported_stages

__all__ = [
    "ANALYSES", "PRESENTATION_ORDER", "canonical_config", "model_analyses", "models_for", "selected_models",
    "model_steps", "untrained_seed", "resolve_checkpoints", "local_checkpoints", "train_settings", "reference_step",
    "check_model_entries", "check_config", "check_model_sizes", "scored_checkpoints",
    "tokenizing_stages", "toy_settings", "toy_image_sets", "ablation_settings", "across_papers_settings",
    "dataset_keys", "DATASETS_EXTRA", "EVAL_EXTRA", "check_max_tokens", "torchvision_keys", "TORCHVISION_EXTRA",
    "TOKENIZING_STAGES", "corpus_params", "samples_params", "heldout_params", "mnist_params",
]


#: The mappings whose entries' order is the order of the tables and figures that list them: kept as
#: written. Every other mapping's key order carries nothing (YAML mappings are unordered).
PRESENTATION_ORDER = (("models",), ("toy", "runs"), ("transformer_ablations", "runs"))


def canonical_config(value, _at=()):
    """`value` (the config, or any part of it) with every mapping's keys sorted, but the entries of
    :data:`PRESENTATION_ORDER`, and tuples as lists: the same settings in any key order are the same
    params to Snakemake, which compares a job's params by their ``repr`` (a config written back by a
    formatter re-planned 155 jobs of the reduced run, training included).

    >>> canonical_config({"b": {"y": 1, "x": (2, 3)}, "a": 0})
    {'a': 0, 'b': {'x': [2, 3], 'y': 1}}
    """
    if isinstance(value, dict):
        keys = list(value) if _at in PRESENTATION_ORDER else sorted(value, key=lambda k: (type(k).__name__, k))
        return {key: canonical_config(value[key], (*_at, key)) for key in keys}
    if isinstance(value, (list, tuple)):
        return [canonical_config(item, (*_at, None)) for item in value]
    return value


def _explicit(model_cfg):
    """``checkpoints`` by integer step; "16" and "016" are one step, given twice."""
    explicit = {}
    for key, value in model_cfg.get("checkpoints", {}).items():
        step = _step(key, f"checkpoints.{key}")
        if step in explicit:
            raise ValueError(f"model config key 'checkpoints': step {step} is given twice")
        explicit[step] = value
    return explicit


def model_steps(model_cfg):
    """Sorted training steps of one model entry (from ``checkpoints`` or ``steps``); step 0 is the
    untrained twin of a hub or local model that asks for one (``init``)."""
    explicit = _explicit(model_cfg)
    steps = sorted(explicit) if explicit else sorted(int(s) for s in model_cfg["steps"])
    return [0, *steps] if untrained_seed(model_cfg) is not None else steps


def untrained_seed(model_cfg):
    """The seed of a hub or local model's untrained twin (its step 0), or None without ``init``."""
    init = model_cfg.get("init")
    return None if init is None or model_cfg["source"] == "train" else int(init.get("seed", 0))


def resolve_checkpoints(model_cfg):
    """Map each training step of a hub model to the repo and revision holding it.

    Parameters
    ----------
    model_cfg : dict
        One model's entry of the workflow config, in either form:

        ``{"repo": "EleutherAI/pythia-410m", "revision": "step{step}", "steps": [0, 128]}``
            One repo; ``revision`` is a :meth:`str.format` template filled with ``step``.
        ``{"checkpoints": {50000: "PY007/TinyLlama-1.1B-step-50K-105b@main"}}``
            An explicit ``"repo@revision"`` per step; the revision defaults to ``"main"``.

        Steps may be given as strings (YAML mapping keys): they are converted to ``int``.

    Returns
    -------
    dict[int, dict]
        ``{step: {"repo": str, "revision": str}}``, sorted by step.

    Raises
    ------
    ValueError
        If neither form is complete; the message names the missing or malformed key.
    """
    if "checkpoints" in model_cfg:
        entries = model_cfg["checkpoints"]
        if not isinstance(entries, dict) or not entries:
            raise ValueError("model config key 'checkpoints' must map steps to 'repo@revision' strings")
        resolved = {}
        for key, spec in entries.items():
            where = f"checkpoints.{key}"
            repo, _, revision = str(spec).partition("@")
            if not repo.strip():
                raise ValueError(f"model config key {where!r} has no repo: {spec!r}")
            _add(resolved, _step(key, where), where, repo.strip(), revision.strip() or "main")
        return dict(sorted(resolved.items()))

    missing = [key for key in ("repo", "steps") if not model_cfg.get(key)]
    if missing:
        raise ValueError(
            f"model config lacks key {missing[0]!r}: give either 'repo', 'revision' (a template such as "
            "'step{step}'; default main) and 'steps', or 'checkpoints' mapping each step to 'repo@revision'"
        )
    template, steps = model_cfg.get("revision", "main"), model_cfg["steps"]
    if not isinstance(steps, (list, tuple)):
        raise ValueError(f"model config key 'steps' must be a list of steps, not {steps!r}")
    resolved = {}
    for value in steps:
        step = _step(value, "steps")
        try:
            revision = template.format(step=step)
        except (KeyError, IndexError, ValueError) as error:
            message = f"model config key 'revision' ({template!r}) is not a {{step}} template: {error}"
            raise ValueError(message) from None
        _add(resolved, step, "steps", model_cfg["repo"], revision)
    if len({entry["revision"] for entry in resolved.values()}) < len(resolved):
        # A template without {step} would silently give every step the same weights.
        raise ValueError(f"model config key 'revision' ({template!r}) gives several steps the same revision")
    return dict(sorted(resolved.items()))


def _step(value, key):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"model config key {key!r}: step {value!r} is not an integer") from None


def _add(resolved, step, key, repo, revision):
    if step in resolved:
        raise ValueError(f"model config key {key!r}: step {step} is given twice")
    resolved[step] = {"repo": repo, "revision": revision}


def local_checkpoints(model_cfg):
    """Step -> directory for a ``source: local`` entry."""
    return {step: str(path) for step, path in _explicit(model_cfg).items()}


def train_settings(config, model):
    """Top-level ``train`` settings with the model's own ``train`` overrides applied."""
    return {**config.get("train", {}), **config["models"][model].get("train", {})}


def reference_step(model_cfg):
    """The backward-cascade reference step: configured, or the middle checkpoint."""
    steps = model_steps(model_cfg)
    return int(model_cfg.get("reference_step", steps[len(steps) // 2]))


TOY_SETTINGS = ("activation", "residual", "layernorm", "width", "depth", "init_scale", "lr", "beta1", "beta2",
                "eps", "batch_size", "steps", "track")


def toy_settings(config, run):
    """The training settings of one toy run: the ``toy`` block's, with the run's changes."""
    toy = config["toy"]
    return {key: toy["runs"][run].get(key, toy[key]) for key in TOY_SETTINGS} | {"ema_betas": tuple(toy["ema_betas"])}


def toy_image_sets(config):
    """The image sets of the toy runs across data sets (the paper's Fig. 13), MNIST (``toy.data``)
    first; none unless ``toy.datasets`` names other sets and runs (and the toy stage runs)."""
    toy = config["toy"]
    datasets = toy["datasets"]
    wanted = toy["activate"] and toy["runs"] and datasets["names"] and datasets["runs"]
    return ["mnist", *datasets["names"]] if wanted else []


ABLATION_SWITCHES = {"activation": "silu", "residual": True, "norm": True}


def ablation_settings(config, run):
    """One transformer-ablation run's :func:`crosslayer.models.train.train_model` settings: the top-level
    ``train`` block, the ablations' ``train`` overrides, the run's switches and its steps."""
    block = config["transformer_ablations"]
    switches = {key: block["runs"][run].get(key, default) for key, default in ABLATION_SWITCHES.items()}
    save_steps = sorted({*block["checkpoints"], block["steps"]})  # the last is the one Table 2 reports
    return {**config.get("train", {}), **block["train"], **switches, "save_steps": save_steps}


#: How to install the optional harness that ``benchmarks`` needs.
EVAL_EXTRA = "pip install -e '.[eval]' in the clone (or 'crosslayer[eval]'; make test installs it)"

#: How to install the optional ``datasets`` package that the dataset sources need.
DATASETS_EXTRA = "pip install -e '.[datasets]' in the clone (or 'crosslayer[datasets]'; make test installs it)"


def dataset_keys(config):
    """The settings that ask for a Hugging Face dataset, as dotted keys: they need the optional
    ``datasets`` package (:data:`DATASETS_EXTRA`); the embedded default asks for none."""
    keys = []
    if config.get("corpus", {}).get("source") == "dataset":
        keys.append("corpus.source")
    dynamics, coupling = config.get("dynamics", {}), config.get("coupling", {})
    if dynamics.get("activate", True) and dynamics.get("samples", {}).get("source") == "dataset":
        keys.append("dynamics.samples.source")
    if coupling.get("activate", True) and coupling.get("prompts", {}).get("datasets"):
        keys.append("coupling.prompts.datasets")
    evaluation = config.get("evaluation", {})
    if evaluation.get("activate", True) and evaluation.get("heldout", {}).get("source") == "dataset":
        keys.append("evaluation.heldout.source")
    return keys


#: How to install the optional ``torchvision`` package that ``toy.data.source: torchvision`` needs.
TORCHVISION_EXTRA = ("pip install -e '.[torchvision]' in the clone (or 'crosslayer[torchvision]'); or use "
                     "toy.data.source: package (offline, 5,000 digits) or directory")


def torchvision_keys(config):
    """The settings that ask for torchvision's MNIST download, as dotted keys: they need the optional
    ``torchvision`` package (:data:`TORCHVISION_EXTRA`); the embedded default asks for none."""
    toy = config.get("toy", {})
    wanted = toy.get("activate", True) and toy.get("runs") and toy.get("data", {}).get("source") == "torchvision"
    return ["toy.data.source"] if wanted else []


def cuda_settings(config):
    """The ``device`` settings that ask for CUDA, as dotted keys (e.g. ``dynamics.device``)."""
    blocks = {name: config.get(name) for name in ("train", *(s.name for s in STAGES if s.device))}
    blocks["transformer_ablations.train"] = config.get("transformer_ablations", {}).get("train")
    blocks["dynamics.schur"] = config.get("dynamics", {}).get("schur")
    blocks |= {f"models.{m}.train": entry.get("train") for m, entry in config["models"].items()}
    return [f"{name}.device" for name, block in blocks.items() if (block or {}).get("device") == "cuda"]


def model_analyses(config, model):
    """The stages `model` takes part in: those activated (alignment always is) that its
    ``analyses`` list names (all when it has none)."""
    wanted = config["models"][model].get("analyses") or ANALYSES
    return [a for a in ANALYSES if a in wanted and (a == "alignment" or config[a]["activate"])]


def models_for(config, stage):
    """The models that take part in `stage`, in config order."""
    return [m for m in config["models"] if stage in model_analyses(config, m)]


def selected_models(config):
    """The ``models`` entries that ``run_models`` names (all when it is null), in its order."""
    names = config.get("run_models")
    if names is None:
        return config["models"]
    unknown = [n for n in names if n not in config["models"]]
    if unknown:
        raise ValueError(f"run_models: {unknown} not in models (defined: {sorted(config['models'])})")
    return {name: config["models"][name] for name in names}


def check_config(config, sizes=None, families=None, contexts=None, untokenized=None):
    """Raise ValueError naming the key for values the schema cannot judge alone.

    Parameters
    ----------
    config : dict
        The validated workflow config (schema defaults filled in).
    sizes : dict, optional
        Model id -> ``{"n_layers", "d_model", "d_ff"}`` of models whose checkpoints were read
        (``source: local``); trained models' sizes come from their train settings. Settings
        that depend on a model's size are checked here for these models and in their jobs for
        the others.
    families : dict, optional
        Model id -> ``(model_type, capabilities, what it lacks in words)`` of models whose family is
        known from their config.json (its adapter's ``capabilities`` and ``limits``): the analyses
        it takes part in must need no capability it lacks (:data:`crosslayer.stages.STAGES`).
    contexts : dict, optional
        Model id -> the longest sequence its config.json allows (None: no limit) of models whose
        checkpoints were read; trained models' is their ``train.context``. ``coupling.prompts.max_tokens``
        must not exceed it (hub models: checked in their coupling jobs).
    untokenized : dict, optional
        Model id -> ``{step: directory}`` of its read checkpoints that hold no tokenizer files: refused
        when the model takes part in a stage that tokenizes text (:data:`TOKENIZING_STAGES`).
    """
    for name, (model_type, capabilities, limits) in (families or {}).items():
        supported, _ = supported_stages(capabilities)
        other = [a for a in model_analyses(config, name) if a not in supported]
        if other:
            allowed = [a for a in model_analyses(config, name) if a in supported]
            raise ValueError(
                f"models.{name}.analyses: {model_type} {limits}, so the {', '.join(other)} stage(s) cannot run on "
                f"it; set models.{name}.analyses: {allowed}")
    for name, missing in (untokenized or {}).items():
        causal = "causal" in (families or {}).get(name, (None, ("causal",)))[1]  # unknown family: assumed causal
        _check_tokenizer(config, name, missing, causal=causal)
    for name, cfg in config["models"].items():
        key = f"models.{name}"
        analyses = cfg.get("analyses") or ANALYSES
        for analysis in analyses:
            after = [a for a in stage(analysis).after if a not in analyses]
            if after and config[analysis].get("activate", True):
                raise ValueError(f"{key}.analyses: {analysis} needs {', '.join(after)} (it reads their results)")
        steps = model_steps(cfg)
        if "reference_step" in cfg and cfg["reference_step"] not in steps:
            raise ValueError(f"{key}.reference_step: {cfg['reference_step']} is not one of the model's steps {steps}")
        if cfg["source"] == "hub":
            try:
                resolve_checkpoints(cfg)
            except ValueError as err:
                raise ValueError(f"{key}: {err}") from None
        if cfg["source"] == "train":
            _check_heads(train_settings(config, name), f"{key}.train")
    if config["topology"]["activate"] and not config["dynamics"]["activate"]:
        raise ValueError("topology.activate: the topology stages need the dynamics stages (dynamics.activate: true)")
    dynamics = config["dynamics"]
    if dynamics["activate"] and dynamics["min_tokens"] > dynamics["max_tokens"]:
        raise ValueError(f"dynamics.min_tokens: {dynamics['min_tokens']} must not exceed dynamics.max_tokens = "
                         f"{dynamics['max_tokens']} (texts are truncated to max_tokens)")
    bounds = dynamics["regime_boundaries"]
    if dynamics["activate"] and bounds is not None and bounds[0] > bounds[1]:
        raise ValueError(f"dynamics.regime_boundaries: {bounds} must be [end of early, start of late] in increasing "
                         "order")
    if config["coupling"]["activate"]:
        _check_coupling(config, contexts)
    toy = config["toy"]
    if toy["activate"] and toy["runs"] and toy["data"]["source"] != "package" and not toy["data"]["directory"]:
        raise ValueError(f"toy.data.directory: needed for source {toy['data']['source']} (where the MNIST files are "
                         "or go)")
    _check_toy_datasets(toy)
    _check_benchmarks(config.get("benchmarks", {}))
    known = dict(sizes or {})
    for name, cfg in config["models"].items():
        if cfg["source"] == "train":
            settings = train_settings(config, name)
            known[name] = {key: settings[key] for key in ("n_layers", "d_model", "d_ff")}
    for name, size in known.items():
        check_model_sizes(config, name, **size)
    ablations = config["transformer_ablations"]
    if ablations["activate"] and ablations["runs"]:
        settings = {**config.get("train", {}), **ablations["train"]}
        _check_heads(settings, "transformer_ablations.train")
        late = [step for step in ablations["checkpoints"] if step >= ablations["steps"]]
        if late:
            raise ValueError(f"transformer_ablations.checkpoints: {late} not below transformer_ablations.steps "
                             f"({ablations['steps']}, always saved)")
        if config["continuity"]["pca_components"] >= settings["n_layers"]:
            raise ValueError(f"continuity.pca_components: {config['continuity']['pca_components']} must be below the "
                             f"{settings['n_layers']} layers of the transformer ablations")
    if config.get("across_papers", {}).get("activate"):
        settings = across_papers_settings(config)
        if (settings.get("coupling_variant") == "cot" and "coupling" in settings["measures"]
                and models_for(config, "coupling") and not config["coupling"].get("prompts", {}).get("cot")):
            raise ValueError("across_papers.coupling_variant: cot, but coupling.prompts.cot is empty: no prompt has "
                             "the CoT variant, so every coupling column would be empty; set coupling.prompts.cot "
                             "(a list of prompt sources, or true for all), or across_papers.coupling_variant: plain")


def _check_coupling(config, contexts):
    coupling = config["coupling"]
    for name, members in coupling.get("fit_subsets", {}).items():
        if unknown := [m for m in members if m not in models_for(config, "coupling")]:
            raise ValueError(f"coupling.fit_subsets.{name}: {unknown} are not models of the coupling stage")
    if coupling["window"] % 2 == 0:
        raise ValueError(f"coupling.window: {coupling['window']} must be odd (a window centred on each depth)")
    if coupling["scores"]:  # with the benchmarks stage, its scores fill in the models the file lacks
        read_scores(coupling["scores"], models=models_for(config, "coupling"), checkpoints=scored_checkpoints(config),
                    complete=not config.get("benchmarks", {}).get("activate", False))
    check_prompt_settings(coupling)
    _check_context(config, contexts)


def scored_checkpoints(config):
    """Coupling model -> ``[step, revision]`` of its last checkpoint, the one its coupling across models
    is measured at and a score must be of; the revision only for hub models (None otherwise)."""
    out = {}
    for name in models_for(config, "coupling"):
        entry = config["models"][name]
        step = model_steps(entry)[-1]
        out[name] = [step, resolve_checkpoints(entry)[step]["revision"] if entry["source"] == "hub" else None]
    return out


def across_papers_settings(config):
    """The ``across_papers`` block with its null defaults filled from the per-paper blocks:
    ``projections`` from ``continuity``, ``Ks`` from ``coupling``, ``community_method`` the first of
    ``topology.methods``; ValueError naming the key for one those stages do not compute."""
    settings = dict(config["across_papers"])
    for key, stage in (("projections", "continuity"), ("Ks", "coupling")):
        computed = config[stage][key]
        if settings[key] is None:
            settings[key] = list(computed)
        elif missing := [v for v in settings[key] if v not in computed]:
            message = f"{missing} are not computed by the {stage} stage ({stage}.{key}: {computed})"
            raise ValueError(f"across_papers.projections: {message}" if key == "projections"
                             else f"across_papers.Ks: {message}")
    methods = config["topology"]["methods"]
    if settings["community_method"] is None:
        settings["community_method"] = methods[0]
    elif settings["community_method"] not in methods:
        raise ValueError(f"across_papers.community_method: {settings['community_method']!r} is not one of "
                         f"topology.methods {methods}")
    return settings


#: The model keys each source reads (besides source, reference_step and analyses); any other
#: would be silently ignored.
SOURCE_KEYS = {"train": ("arch", "train", "steps"),
               "hub": ("repo", "revision", "steps", "checkpoints", "init", "untrained_step"),
               "local": ("checkpoints", "init", "untrained_step")}


def check_model_entries(config):
    """Raise ValueError naming the key of a model entry's setting that its source would ignore
    (e.g. ``checkpoints`` of a trained model, ``steps`` of a local one) or of a step given twice
    (``"16"`` and ``"016"``). Run before any checkpoint is read."""
    for name, cfg in config["models"].items():
        key, source = f"models.{name}", cfg["source"]
        ignored = [k for k in cfg if k not in (*SOURCE_KEYS[source], "source", "reference_step", "analyses",
                                                         "training_tokens")]
        if ignored:
            raise ValueError(f"{key}.{ignored[0]}: does not apply to `source: {source}` models, which read "
                             f"{', '.join(SOURCE_KEYS[source])}; remove it")
        try:
            explicit = _explicit(cfg)
        except ValueError as err:
            raise ValueError(f"{key}: {err}") from None
        steps = explicit or [int(s) for s in cfg.get("steps", [])]
        if "init" in cfg and 0 in steps:
            raise ValueError(f"{key}.init: step 0 is the untrained twin, but the model already has a step 0; "
                             "remove init, or that step")
        if "untrained_step" in cfg and ("init" in cfg or cfg["untrained_step"] not in steps):
            raise ValueError(f"{key}.untrained_step: {cfg['untrained_step']} is not one of the model's steps "
                             f"{sorted(steps)}{' (init makes step 0 the untrained twin)' if 'init' in cfg else ''}")


def tokenizing_stages(config, model, *, causal=True):
    """The stages that tokenize text with `model`'s own tokenizer: its analyses that do
    (:data:`TOKENIZING_STAGES`), and held-out loss and benchmarks where they run (on a causal decoder:
    an encoder's held-out loss is not measured)."""
    stages = [a for a in model_analyses(config, model) if a in TOKENIZING_STAGES]
    return stages + [s for s in ("evaluation", "benchmarks") if causal and config.get(s, {}).get("activate")]


def _check_tokenizer(config, name, missing, causal=True):
    """A read checkpoint without tokenizer files fails the first job of a stage that tokenizes text."""
    stages = tokenizing_stages(config, name, causal=causal)
    if not missing or not stages:
        return
    (step, path), *others = sorted(missing.items())
    more = f" (and step(s) {[s for s, _ in others]})" if others else ""
    weight_only = [a for a in model_analyses(config, name) if a not in TOKENIZING_STAGES]
    switches = [f"{s}.activate: false" for s in ("evaluation", "benchmarks") if s in stages]
    raise ValueError(f"models.{name}.checkpoints: step {step} ({path}) holds no tokenizer files{more}, and the "
                     f"{', '.join(stages)} stage(s) tokenize text with the checkpoint's own tokenizer: save it beside "
                     f"the weights (tokenizer.save_pretrained of that directory), or set models.{name}.analyses: "
                     f"{weight_only}" + "".join(f" and {switch}" for switch in switches))


def _check_context(config, contexts):
    """Prompts cut to ``coupling.prompts.max_tokens`` must fit each coupling model's context, where
    it is known before any job (trained models, and `contexts`); hub models' in the job."""
    cut = config["coupling"].get("prompts", {}).get("max_tokens")
    if cut is None:
        return
    known = {name: (context, "its config.json") for name, context in (contexts or {}).items()}
    for name, cfg in config["models"].items():
        if cfg["source"] == "train" and train_settings(config, name).get("context") is not None:
            known[name] = (train_settings(config, name)["context"], f"models.{name}.train.context or train.context")
    too_short = sorted((context, name, where) for name, (context, where) in known.items()
                       if context is not None and cut > context and "coupling" in model_analyses(config, name))
    if too_short:
        context, name, where = too_short[0]
        check_max_tokens(cut, context, model=name, where=where)


def check_max_tokens(cut, context, *, model, where="its config.json"):
    """Raise ValueError naming ``coupling.prompts.max_tokens`` when prompts cut to `cut` tokens can still
    be longer than a model's `context` (None: no limit); `where` says where the context comes from."""
    if cut is not None and context is not None and cut > context:
        raise ValueError(f"coupling.prompts.max_tokens: {cut} is more than the context of models.{model}, {context} "
                         f"tokens ({where}), so a prompt cut to it can still be too long for the model; lower it "
                         f"to {context} or less")


def _check_heads(settings, key):
    if settings["d_model"] % settings["n_heads"]:
        raise ValueError(f"{key}.n_heads: {settings['n_heads']} must divide d_model = {settings['d_model']}")


def check_model_sizes(config, model, *, n_layers, d_model, d_ff):
    """Raise ValueError naming the key of a setting that one model's sizes make meaningless, for the
    stages that model takes part in (:func:`model_analyses`): a setting too large for a model that
    skips its stage is no error.

    The top-k subspace of ``W_down @ W_up`` (rank at most min(d_model, d_ff)) would hold noise
    directions at ``alignment.k >= min(d_model, d_ff)``; Table 1 has no layer pair farther apart
    than ``n_layers - 1``; the dynamics and topology subspaces and graphs live in d_model units.
    """
    where = f"models.{model} ({n_layers} layers, d_model = {d_model}, d_ff = {d_ff})"
    stages = model_analyses(config, model)
    if "alignment" in stages:
        k = config["alignment"]["k"]
        if k >= min(d_model, d_ff):
            raise ValueError(f"alignment.k: {k} must be smaller than d_model and d_ff of {where}")
        too_far = [n for n in config["alignment"]["distances"] if n >= n_layers]
        if too_far:
            raise ValueError(f"alignment.distances: {too_far} must be below the number of layers of {where}")
    for stage in ("dynamics", "topology"):
        if stage in stages and config[stage]["k"] >= d_model:
            raise ValueError(f"{stage}.k: {config[stage]['k']} must be smaller than d_model of {where}")
    coupling = config["coupling"]
    if "coupling" in stages:
        if max(coupling["Ks"]) > d_model:
            raise ValueError(f"coupling.Ks: {coupling['Ks']} must not exceed d_model of {where}")
        pairs = [pair for pair in coupling["token_wise"]["layer_pairs"] if max(pair) >= n_layers]
        if pairs and coupling["token_wise"]["prompts"]:
            raise ValueError(f"coupling.token_wise.layer_pairs: {pairs} must be layers below {n_layers} of {where}")
        if coupling["window"] > n_layers + 1:
            raise ValueError(f"coupling.window: {coupling['window']} is longer than the {n_layers + 1} states of a "
                             f"trajectory of {where}")
    continuity = config["continuity"]
    if "continuity" in stages and continuity["pca_components"] >= n_layers:
        raise ValueError(f"continuity.pca_components: {continuity['pca_components']} must be below the number of "
                         f"layers of {where} (L principal vectors span at most L - 1 centred directions)")
    bounds = config["dynamics"]["regime_boundaries"]
    if "dynamics" in stages and bounds is not None and bounds[1] > n_layers:
        raise ValueError(f"dynamics.regime_boundaries: {bounds} must not exceed the number of layers of {where}")


# The settings a data-preparing rule passes as params: only those its source reads, so that a key
# of a source not selected (a dataset's path under an offline source) re-runs nothing downstream.


def corpus_params(corpus):
    """prepare_corpus's settings of the ``corpus`` block: the dataset's only for ``source: dataset``;
    the vocabulary size to train a tokenizer, or the tokenizer and its revision."""
    out = {"source": corpus["source"], "max_chars": corpus["max_chars"], "tokenizer": corpus["tokenizer"]}
    if corpus["source"] == "dataset":
        out["dataset"] = corpus["dataset"]
    if corpus["tokenizer"] is None:
        out["vocab_size"] = corpus["vocab_size"]
    else:
        out["tokenizer_revision"] = corpus["tokenizer_revision"]
    return out


def samples_params(samples):
    """prepare_samples's settings of ``dynamics.samples``: the dataset's only for ``source: dataset``."""
    return {key: value for key, value in samples.items() if key != "dataset" or samples["source"] == "dataset"}


def heldout_params(heldout):
    """prepare_heldout's settings of ``evaluation.heldout``: the source, and the dataset's only for
    ``source: dataset`` (the windows' settings belong to the per-checkpoint jobs)."""
    return {"source": heldout["source"], **({"dataset": heldout["dataset"]} if heldout["source"] == "dataset" else {})}


def _check_toy_datasets(toy):
    datasets = {"names": [], "runs": [], "directory": None, **toy.get("datasets", {})}
    if not (toy["activate"] and toy["runs"]):
        return
    if unknown := [run for run in datasets["runs"] if run not in toy["runs"]]:
        raise ValueError(f"toy.datasets.runs: {unknown} are not runs of toy.runs (each is trained on MNIST too)")
    if datasets["names"] and not datasets["runs"]:
        raise ValueError(f"toy.datasets.names: {datasets['names']} but toy.datasets.runs is empty: name the runs of "
                         "toy.runs to train on them")
    if datasets["names"] and not datasets["directory"]:
        raise ValueError("toy.datasets.directory: needed for toy.datasets.names (torchvision's download root, or "
                         "where the files are)")


def _check_benchmarks(benchmarks):
    """What the harness would refuse in the first job, from the config alone (the names it knows are
    checked in ``onstart``, :func:`crosslayer.evaluation.tasks.check_task_names`)."""
    if not benchmarks.get("activate"):
        return
    names = [task["task"] for task in benchmarks["tasks"]]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise ValueError(f"benchmarks.tasks: {twice} named more than once; give each task once, with its shots and "
                         "metric")
    if "average" in names:
        raise ValueError("benchmarks.tasks: 'average' is the name of the mean row of the score tables; rename the "
                         "task")
    include = benchmarks.get("include_path")
    if include and not os.path.isdir(include):
        raise ValueError(f"benchmarks.include_path: {include} is not a folder (of task YAML files)")
    if not include and not benchmarks.get("builtin", True):
        raise ValueError("benchmarks.builtin: false, but benchmarks.include_path is not set: no task can be found")


def mnist_params(data):
    """prepare_mnist's settings of ``toy.data``: the split's (test_fraction, seed) for the shipped
    digits, the directory for the others."""
    keep = ("test_fraction", "seed") if data["source"] == "package" else ("directory",)
    return {"source": data["source"], **{key: data.get(key) for key in keep}}
