"""The runtime harness: runs a file's declared cases to show that a bug
happens under the placement it needs, that devlint's fix makes the code run,
and that the fix changes nothing else (docs/harness.md).

It executes user code, so it runs only on request (``devlint verify``,
``devlint fix --apply --verify``). torch is imported only in the child
processes (``devlint.harness.worker``, ``devlint.harness.env``), never here.
"""

from devlint.harness.cases import CaseError, check_case, declares_cases
from devlint.harness.supervise import FileJob, job_for_text, torch_available, verify_jobs

__all__ = ["CaseError", "FileJob", "check_case", "declares_cases", "job_for_text", "torch_available", "verify_jobs"]
