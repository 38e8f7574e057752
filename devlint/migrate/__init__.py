"""Codemods that move a training script to another way of running it
(``devlint migrate``). Unlike fixes, a migration changes how the script runs:
it is always unsafe, and it refuses what it cannot rewrite faithfully.

- :func:`migrate_ddp`: ``nn.DataParallel`` to ``DistributedDataParallel``
  under ``torchrun`` (docs/migrate.md).
"""

from devlint.migrate.ddp import CannotMigrate, Migration, migrate_ddp

__all__ = ["CannotMigrate", "Migration", "migrate_ddp"]
