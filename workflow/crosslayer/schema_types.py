"""Each number of a config as its JSON-schema key declares it (standard library only, so the
Snakefile can import it before anything else)."""

__all__ = ["RENAMED", "renamed_keys", "typed_config"]


def typed_config(value, schema, _root=None):
    """`value` (the config, or any part of it, against its part of the JSON schema) with each number
    of the type its schema key declares: an ``integer`` key's integral float as an int (``3.0``,
    which JSON Schema counts as an integer, broke a job deep in its library) and a ``number`` key's
    int as a float (``1`` for ``1.0``: the same setting, so the same params, which re-run nothing).

    >>> schema = {"properties": {"k": {"type": "integer"}, "alphas": {"type": "array", "items": {"type": "number"}}}}
    >>> typed_config({"k": 3.0, "alphas": [0, 0.5, 1]}, schema)
    {'k': 3, 'alphas': [0.0, 0.5, 1.0]}
    """
    root = schema if _root is None else _root
    while "$ref" in schema:  # "#/$defs/name", with the keys beside it
        target = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if isinstance(value, dict):
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties")
        return {key: typed_config(item, properties.get(key, extra if isinstance(extra, dict) else {}), root)
                for key, item in value.items()}
    if isinstance(value, list):
        items = schema.get("items")
        return [typed_config(item, items if isinstance(items, dict) else {}, root) for item in value]
    if isinstance(value, float) and "integer" in types and "number" not in types and value.is_integer():
        return int(value)
    if type(value) is int and "number" in types and "integer" not in types:  # a bool is no number here
        return float(value)
    return value


#: Keys a release replaced, and what to write instead.
RENAMED = {"epochs": "toy.steps, the Adam steps of a run (the paper's 20 epochs of 60k digits at batch 128 are "
                     "9,380; an epoch is ceil(digits / batch_size) steps), and toy.track, the rows it records"}


def renamed_keys(config):
    """Each use of a replaced key of :data:`RENAMED` in the toy block (its runs too), saying what
    to write instead; validation alone would only call the key unexpected."""
    toy = config.get("toy") or {}
    places = {"toy": toy} | {f"toy.runs.{name}": run for name, run in (toy.get("runs") or {}).items()}
    return [f"{where}.{key} is replaced by {instead}" for where, block in places.items()
            if isinstance(block, dict) for key, instead in RENAMED.items() if key in block]
