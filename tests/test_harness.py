"""The runtime harness (docs/harness.md): cases, the simulated device path,
isolation of crashing and hanging cases, the CLI, and every fixture's cases.

The harness runs user code in child processes; these tests run each group
of files in one call so that torch is imported a few times, not per test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from devlint.harness import CaseError, check_case, declares_cases, job_for_text, verify_jobs
from devlint.harness.report import exit_code

torch = pytest.importorskip("torch")

CASES = ROOT / "tests" / "harness_cases"
SIMULATED_2 = "simulated (2 fake CUDA devices)"


def _job(path: Path):
    return job_for_text(str(path.relative_to(ROOT)), path.read_text())


def _by_case(results):
    return {r["case"]: r for r in results}


# --------------------------------------------------------------------------
# the convention (no child process)


def test_case_defaults_and_errors():
    c = check_case({"name": "a", "model": object, "inputs": tuple, "placement": "data_parallel"})
    assert c["devices"] == 2 and c["model_device"] == "cuda:0" and c["seed"] == 0
    c = check_case({"name": "b", "model": object, "inputs": tuple, "placement": "as_written"})
    assert c["model_device"] is None and c["input_device"] == "first_parameter"
    with pytest.raises(CaseError, match="placement"):
        check_case({"name": "a", "model": object, "inputs": tuple, "placement": "dp"})
    with pytest.raises(CaseError, match="'inputs' must be a callable"):
        check_case({"name": "a", "model": object, "inputs": (1,), "placement": "data_parallel"})
    with pytest.raises(CaseError, match="unknown key 'device'"):
        check_case({"name": "a", "model": object, "inputs": tuple, "placement": "data_parallel", "device": 2})
    with pytest.raises(CaseError, match="devices"):
        check_case({"name": "a", "model": object, "inputs": tuple, "placement": "data_parallel", "devices": 1})
    with pytest.raises(CaseError, match="'load'"):
        check_case({"name": "a", "placement": "checkpoint", "state": dict})


def test_declares_cases_reads_without_running():
    assert declares_cases("import os\ndef devlint_cases():\n    os.abort()\n")
    assert not declares_cases("def helper():\n    def devlint_cases():\n        pass\n")
    assert not declares_cases("devlint_cases = 1\n")
    assert not declares_cases("def devlint_cases(:\n")


def test_check_never_imports_torch(tmp_path):
    """The linter installs without torch: check and fix must not import it."""
    target = FIXTURES / "DL001" / "bad_seq2seq_positions.py"
    code = (
        "import sys\n"
        "from devlint.cli import main\n"
        "for args in (['check', sys.argv[1]], ['fix', sys.argv[1]], ['rule', 'DL001']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print('IMPORTED', bad[:3])\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-500:] + proc.stderr[-500:]


# --------------------------------------------------------------------------
# behaviour on the simulated path (one harness run for all these files)


@pytest.fixture(scope="module")
def behaviour():
    files = [CASES / "replica_and_limits.py", CASES / "crash_and_hang.py", CASES / "checkpoint_load.py"]
    results = verify_jobs([_job(p) for p in files], simulate=True, timeout=12, workers=2)
    return {Path(r["file"]).stem: _by_case([x for x in results if x["file"] == r["file"]]) for r in results}


def test_replica_only_failure_is_reproduced(behaviour):
    r = behaviour["replica_and_limits"]["replica_only"]
    # next(self.parameters()) works on one device but a replica has no parameters
    assert r["original"]["status"] == "reproduced"
    assert r["original"]["error"]["type"] == "StopIteration"
    assert r["device_path"] == SIMULATED_2
    assert r["verdict"] == "not confirmed"  # devlint has no fix for that line


def test_model_parallel_as_written(behaviour):
    r = behaviour["replica_and_limits"]["model_parallel"]
    assert r["placement"] == "as_written"
    assert r["original"]["error"]["message"].startswith("Expected all tensors to be on the same device")
    assert "cpu" in r["original"]["error"]["message"]
    assert r["fixed"]["status"] == "ok"
    assert r["fixed"]["outputs"] == [{"shape": [5, 3], "device": "cuda:1", "dtype": "float32"}]
    assert r["equivalence"]["status"] == "equal"
    assert r["verdict"] == "confirmed"


def test_a_case_that_runs_is_not_reproduced(behaviour):
    r = behaviour["replica_and_limits"]["nothing_to_reproduce"]
    assert r["original"]["status"] == "not reproduced"
    assert r["verdict"] == "not confirmed"


def test_crash_and_hang_are_isolated(behaviour):
    cases = behaviour["crash_and_hang"]
    assert list(cases) == ["aborts", "hangs", "survivor", "malformed"]
    assert "SIGABRT" in cases["aborts"]["crash"]
    assert "12s" in cases["hangs"]["timeout"]
    assert cases["survivor"]["verdict"] == "confirmed"
    assert "'inputs' must be a callable" in cases["malformed"]["case_error"]
    assert all(cases[c]["verdict"] == "error" for c in ("aborts", "hangs", "malformed"))


def test_checkpoint_without_map_location(behaviour):
    r = behaviour["checkpoint_load"]["cpu_only_machine"]
    assert r["original"]["status"] == "reproduced"
    assert "Attempting to deserialize object on a CUDA device" in r["original"]["error"]["message"]
    assert r["device_path"].startswith("cpu-only")


def test_exit_codes():
    assert exit_code([]) == 1
    assert exit_code([{"verdict": "confirmed"}]) == 0
    assert exit_code([{"verdict": "confirmed"}, {"verdict": "not confirmed"}]) == 1
    assert exit_code([{"verdict": "not confirmed"}, {"verdict": "error"}]) == 2


# --------------------------------------------------------------------------
# the CLI


def test_fix_apply_verify_uses_the_text_before_the_fix(tmp_path):
    target = tmp_path / "model.py"
    shutil.copy(FIXTURES / "DL001" / "bad_rnn_hidden_state.py", target)
    proc = subprocess.run(
        [sys.executable, "-m", "devlint", "fix", "--apply", "--verify", "--simulate", "model.py"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Fixed 3 problems in 1 file" in proc.stdout + proc.stderr
    assert "Input and hidden tensors are not at the same device" in proc.stdout
    assert "1 case: 1 confirmed" in proc.stdout
    assert "device=" in target.read_text()


def test_verify_json_and_no_cases(tmp_path):
    (tmp_path / "plain.py").write_text("import torch\n")
    proc = subprocess.run([sys.executable, "-m", "devlint", "verify", "plain.py"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1 and "no harness cases" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "devlint", "fix", "--verify", "plain.py"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "--verify needs --apply" in proc.stderr


# --------------------------------------------------------------------------
# every fixture that carries cases, on the simulated path (what CI runs)

WITH_CASES = sorted(
    p for p in FIXTURES.glob("DL*/bad_*.py") if p.name.count(".") == 1 and declares_cases(p.read_text())
)


@pytest.fixture(scope="module")
def fixture_results():
    results = verify_jobs([_job(p) for p in WITH_CASES], simulate=True, timeout=120, workers=2)
    out = {}
    for r in results:
        out.setdefault(r["file"], []).append(r)
    return out


def test_dl001_fixtures_carry_cases():
    assert {p.name for p in WITH_CASES if p.parent.name == "DL001"} == {
        p.name for p in (FIXTURES / "DL001").glob("bad_*.py") if p.name.count(".") == 1
    }


@pytest.mark.parametrize("path", WITH_CASES, ids=[f"{p.parent.name}/{p.name}" for p in WITH_CASES])
def test_fixture_cases_are_confirmed(path, fixture_results):
    rows = fixture_results[str(path.relative_to(ROOT))]
    assert rows
    for r in rows:
        assert r["verdict"] == "confirmed", json.dumps(r, indent=1, default=str)[:3000]
        assert r["device_path"].startswith(("simulated", "cpu-only"))


# --------------------------------------------------------------------------
# real GPUs (skipped without CUDA)


def _cuda() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.skipif(_cuda() == 0, reason="needs a CUDA GPU")
def test_real_gpu_path_confirms_dl001_fixtures():
    files = sorted(p for p in (FIXTURES / "DL001").glob("bad_*.py") if p.name.count(".") == 1)
    results = verify_jobs([_job(p) for p in files], simulate=False, timeout=300, workers=1)
    expected = "real (cuda:0 + cpu)" if _cuda() == 1 else "real ("
    for r in results:
        assert r["device_path"].startswith(expected), r["device_path"]
        assert r["verdict"] == "confirmed", json.dumps(r, indent=1, default=str)[:3000]


@pytest.mark.gpu
@pytest.mark.skipif(_cuda() == 0, reason="needs a CUDA GPU")
def test_real_gpu_model_parallel_and_replicas():
    results = _by_case(verify_jobs([_job(CASES / "replica_and_limits.py")], simulate=False, timeout=300))
    assert results["model_parallel"]["verdict"] == "confirmed"
    assert results["replica_only"]["original"]["error"]["type"] == "StopIteration"
    assert results["nothing_to_reproduce"]["original"]["status"] == "not reproduced"
