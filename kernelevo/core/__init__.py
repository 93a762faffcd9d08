"""The data model of a search: the genome (code, declared space, chosen values), the individual that carries it
with its lineage and result, the record of one evaluation (its status an enum), the lock around ast.parse, and how
records are read back from JSON. The bottom layer: every other package imports it; it imports none of them (the
order: docs/architecture.md)."""
