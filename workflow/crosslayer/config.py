"""Reading the validated workflow config: which checkpoints each model has, and checks that a
JSON schema cannot express. Standard library only, so the Snakefile can import it anywhere.

Errors are ``ValueError`` whose message starts with the config key, e.g.
``models.tiny-gelu.reference_step: 7 is not one of the model's steps [0, 10, 100]``.
"""

__all__ = ["model_steps", "resolve_checkpoints", "local_checkpoints", "train_settings", "reference_step", "check_config"]


def _explicit(model_cfg):
    return {int(step): value for step, value in model_cfg.get("checkpoints", {}).items()}


def model_steps(model_cfg):
    """Sorted training steps of one model entry (from ``checkpoints`` or ``steps``)."""
    explicit = _explicit(model_cfg)
    return sorted(explicit) if explicit else sorted(int(s) for s in model_cfg["steps"])


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

    missing = [key for key in ("repo", "revision", "steps") if not model_cfg.get(key)]
    if missing:
        raise ValueError(
            f"model config lacks key {missing[0]!r}: give either 'repo', 'revision' (a template such as "
            "'step{step}') and 'steps', or 'checkpoints' mapping each step to 'repo@revision'"
        )
    template, steps = model_cfg["revision"], model_cfg["steps"]
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


def check_config(config):
    """Raise ValueError naming the key for values the schema cannot judge alone."""
    for name, cfg in config["models"].items():
        key = f"models.{name}"
        steps = model_steps(cfg)
        if "reference_step" in cfg and cfg["reference_step"] not in steps:
            raise ValueError(f"{key}.reference_step: {cfg['reference_step']} is not one of the model's steps {steps}")
        if cfg["source"] == "hub":
            try:
                resolve_checkpoints(cfg)
            except ValueError as err:
                raise ValueError(f"{key}: {err}") from None
        if cfg["source"] == "train":
            settings = train_settings(config, name)
            if settings["d_model"] % settings["n_heads"]:
                raise ValueError(
                    f"{key}.train.n_heads: {settings['n_heads']} must divide d_model = {settings['d_model']}"
                )
        elif "arch" in cfg or "train" in cfg:
            raise ValueError(f"{key}: `arch` and `train` apply only to `source: train` models")
        if cfg["source"] != "hub" and "repo" in cfg:
            raise ValueError(f"{key}.repo: only `source: hub` models have a repo")
    if config["topology"]["activate"] and not config["dynamics"]["activate"]:
        raise ValueError("topology.activate: the topology stages need the dynamics stages (dynamics.activate: true)")
    k = config["alignment"]["k"]
    for name, cfg in config["models"].items():
        if cfg["source"] == "train" and k >= train_settings(config, name)["d_model"]:
            raise ValueError(f"alignment.k: {k} must be smaller than models.{name} d_model")
