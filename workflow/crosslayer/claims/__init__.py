"""Each paper's headline findings as verdicts on the workflow's own tables.

A claim is data, not code: one YAML file per paper under ``catalogue/`` states each finding with its
section, a short verbatim quote, the table and column(s) that measure it, the comparison it makes,
the statistic, the direction or threshold as the paper states it, and the units the uncertainty is
taken over (:mod:`crosslayer.claims.catalogue` reads and validates it). One engine
(:func:`crosslayer.claims.engine.evaluate`) turns a claim and the tables a reader hands over (pandas
DataFrames keyed by table name) into a :class:`~crosslayer.claims.engine.Verdict`.

Verdicts, the same rule for every kind of comparison (:mod:`crosslayer.claims.rule`) on the interval
each kind gives (:mod:`crosslayer.claims.kinds`), its error rates measured on planted nulls
(``python -m bench calibration``):

``holds``
    the interval lies entirely on the paper's side of its stated value;
``contradicted``
    the interval lies entirely on the other side;
``inconclusive``
    the interval straddles the value (or the statistic is undefined);
``not testable``
    the run lacks the comparison (no step 0, one checkpoint, one model of a family, too few units,
    a table or column absent), or the catalogue marks the claim beyond the workflow's tables; the
    reason names what is missing.
"""
