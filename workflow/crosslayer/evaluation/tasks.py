"""The benchmarks' task names, checked before any job: each configured task is one the harness
(lm-evaluation-harness) or ``benchmarks.include_path`` defines, and a task file under
``include_path`` that does not parse is named with its YAML error (the harness skips such a file
silently, so its task is then merely "not registered").

Errors are ``ValueError`` whose message starts with the config key.
"""

from pathlib import Path

import yaml

from crosslayer.errors import shorten

__all__ = ["unparsable_task_files", "check_task_names"]


class _TaskLoader(yaml.SafeLoader):
    """YAML as the harness writes it: its tags (``!function utils.process_docs``) are read as
    strings, never resolved: only whether the file parses is asked here."""


_TaskLoader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node)
                                  if isinstance(node, yaml.ScalarNode) else None)


def unparsable_task_files(include_path):
    """``[(path, error)]`` of the ``*.yaml`` files under `include_path` that do not parse, in path
    order; the error cut to a few hundred characters."""
    broken = []
    for path in sorted(Path(include_path).glob("**/*.yaml")):
        try:
            yaml.load(path.read_text(encoding="utf-8"), Loader=_TaskLoader)  # noqa: S506 (a safe loader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            broken.append((path, shorten(" ".join(str(error).split()))))
    return broken


def check_task_names(tasks, *, include_path=None, builtin=True, known=None):
    """Raise ValueError naming ``benchmarks.tasks`` for a task neither the harness nor
    `include_path` defines, and each task file under `include_path` that does not parse.

    Parameters
    ----------
    tasks : sequence of str
        The configured task names.
    include_path : str, optional
        ``benchmarks.include_path``.
    builtin : bool, default=True
        ``benchmarks.builtin``: the harness's own tasks count too.
    known : iterable of str, optional
        The names the harness knows (tasks, groups, tags); by default its ``TaskManager``'s, built
        with `include_path` and `builtin` (about 6 s with the harness's 14,000 tasks).
    """
    if known is None:
        from lm_eval.tasks import TaskManager

        known = TaskManager(include_path=include_path, include_defaults=builtin).all_tasks
    known = set(known)
    unknown = [task for task in tasks if task not in known]
    if not unknown:
        return
    where = " and ".join(([f"the harness's own ({len(known):,} names)"] if builtin else [])
                         + ([f"benchmarks.include_path ({include_path})"] if include_path else []))
    broken = unparsable_task_files(include_path) if include_path else []
    files = "".join(f"\n  {path}: {error}" for path, error in broken)
    raise ValueError(f"benchmarks.tasks: {unknown} are not tasks of {where}: check the names (lm-eval ls tasks "
                     "lists them)" + (f"; these task files do not parse, so their tasks are missing:{files}"
                                      if broken else ""))
