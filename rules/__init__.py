"""devlint's rules: one module per rule, discovered by the engine.

Installed as ``devlint.rules``. Each module defines one :class:`devlint.rule.Rule`
subclass whose module docstring is the rule's documentation.
"""
