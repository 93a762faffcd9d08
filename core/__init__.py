"""The data model of a search: the genome (code, declared space, chosen values), the individual that carries it
with its lineage and result, the lock around ast.parse, and how records are read back from JSON. The bottom layer:
the judge (fitness), the operators, the seed sources and the search import it; it imports none of them."""
