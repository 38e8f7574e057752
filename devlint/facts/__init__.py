"""Fact providers: analyses that rules ask questions of.

Each provider is one module with its own record types, its declared
``requires`` and its own test file; :mod:`devlint.facts.store` builds them
lazily per file (see ``docs/architecture.md``):

- :mod:`~devlint.facts.classes` (``Classes``): imports, module-level devices,
  classes with their methods, attributes and forward reach;
- :mod:`~devlint.facts.flow` (``Flow``): where each tensor lives and where
  values on different devices meet;
- :mod:`~devlint.facts.scripts` (``Scripts``): wrap, placement and binding
  events per function;
- :mod:`~devlint.facts.training` (``Training``): models, loaders and devices
  per scope of training code.
"""
