"""Seeing the whole project: module names, per-file summaries, the index.

- :mod:`~devlint.project.names`: a file's dotted module name, and an import
  target (relative ones included) as an absolute name;
- :mod:`~devlint.project.imports`: the imports of a file read without a parse,
  for the import order and the re-exports;
- :mod:`~devlint.project.summary`: the narrow, versioned JSON summary a file
  exports (its classes, as the :class:`~devlint.facts.classes.Classes`
  provider records them, names made absolute);
- :mod:`~devlint.project.index`: the index a file consults for the names it
  imports, and the order files are analysed in (import order, cycles
  together).

See ``docs/architecture.md`` ("The project index").
"""
