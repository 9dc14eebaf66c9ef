"""Checks of the coupling stage's settings that a JSON schema cannot express: token positions
inside the cut prompts, and the prompt sources that ``cot``, ``pooled`` and ``regularity_source``
name. Standard library only, as :mod:`crosslayer.config`, which runs them before any job.
"""

__all__ = ["check_prompt_settings", "unpooled_sources"]


def check_prompt_settings(coupling):
    """Every check below on the validated ``coupling`` block; a ``ValueError`` names the key."""
    _check_prompt_length(coupling)
    _check_cot_sources(coupling.get("prompts", {}))
    _check_pooling(coupling)


def unpooled_sources(prompts):
    """The labels of the datasets of ``coupling.prompts`` with ``pooled: false``: measured for their own
    tables, left out of source ``all``."""
    return [spec["label"] for spec in prompts.get("datasets", []) if not spec.get("pooled", True)]


def _check_prompt_length(coupling):
    """Token positions the coupling stage reads must lie inside prompts cut to
    ``coupling.prompts.max_tokens`` (when set; else each prompt's length is checked in the job)."""
    cut = coupling.get("prompts", {}).get("max_tokens")
    if cut is None:
        return
    token = coupling.get("depthwise_token", -1)
    if not -cut <= token < cut:
        raise ValueError(f"coupling.depthwise_token: {token} lies outside every prompt, which "
                         f"coupling.prompts.max_tokens cuts to {cut} tokens; choose from {-cut} to {cut - 1}")
    token_wise = coupling.get("token_wise", {})
    if token_wise.get("prompts") and token_wise.get("tokens", 0) > cut:
        raise ValueError(f"coupling.token_wise.tokens: {token_wise['tokens']} is more than the {cut} tokens "
                         "coupling.prompts.max_tokens leaves in a prompt; lower it or raise max_tokens")


def _prompt_sources(prompts):
    """The sources of the prompt set, in its order: ``file``, ``corpus``, then each dataset's label."""
    labels = [spec.get("label") or spec.get("path") for spec in prompts.get("datasets", [])]
    return ["file"] * bool(prompts.get("file")) + ["corpus"] * bool(prompts.get("corpus_paragraphs")) + labels


def _check_pooling(coupling):
    """Source ``all`` needs a pooled source, and ``coupling.regularity_source`` names ``all`` or a source."""
    prompts = coupling.get("prompts", {})
    sources = _prompt_sources(prompts)
    unpooled = unpooled_sources(prompts)
    if sources and set(sources) <= set(unpooled):
        raise ValueError(f"coupling.prompts.datasets: every prompt source ({sources}) has pooled: false, so the "
                         "pooled set (source all: the fits, figures and claims) is empty; pool at least one")
    source = coupling.get("regularity_source", "all")
    if source != "all" and source not in sources:
        raise ValueError(f"coupling.regularity_source: {source!r} is not a source of the prompt set; choose all or "
                         f"one of {sources}")


def _check_cot_sources(prompts):
    """Each source ``coupling.prompts.cot`` names must give prompts: ``file`` a prompt file, ``corpus``
    corpus paragraphs, any other name a dataset's label (else ``prepare_prompts`` refuses it, after
    the models are trained)."""
    cot = prompts.get("cot", False)
    if cot is True or not cot:
        return
    sources = _prompt_sources(prompts)
    for source in cot:
        if source in sources:
            continue
        if source == "file":
            raise ValueError("coupling.prompts.cot: names file, but coupling.prompts.file is null (no prompt file): "
                             "set coupling.prompts.file, or remove file from coupling.prompts.cot")
        if source == "corpus":
            raise ValueError("coupling.prompts.cot: names corpus (as the embedded default does), but "
                             "coupling.prompts.corpus_paragraphs is 0 (no corpus prompts): set corpus_paragraphs "
                             f"above 0, or set coupling.prompts.cot to sources of the prompt set {sources} (or false)")
        raise ValueError(f"coupling.prompts.cot: {source!r} is not a source of the prompt set {sources}: no "
                         f"coupling.prompts.datasets entry is labelled {source!r}; add one, or remove {source!r} "
                         "from coupling.prompts.cot")
