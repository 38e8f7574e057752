"""Fact providers: analyses that rules ask questions of.

The older facts live in :mod:`devlint.semantic`; providers move here one by
one (see ``docs/architecture.md``). Each provider is one module with its own
record types and its own test file.
"""
