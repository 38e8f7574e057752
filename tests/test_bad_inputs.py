"""Bad input never crashes devlint: each gets one clear line naming the file
and the problem (never a traceback), and the other files are still checked.

Most cases run through click's CliRunner; the ones where a crash would be a
signal (native parser) or where the operating system matters run the
installed ``devlint`` in a subprocess.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clirun import BUG, BUG_LINE, BUGGY_CALL, FIXED, FIXED_CALL, cli, run

GOOD_FILE = "good.py"


@pytest.fixture
def project(tmp_path):
    """A folder holding one file with a real DL001 finding; a bad input is
    added beside it, and that finding must still be reported."""
    (tmp_path / GOOD_FILE).write_text(BUG)
    return tmp_path


def _still_checked(out) -> None:
    assert f"{GOOD_FILE}:{BUG_LINE}:" in out.stdout, out.output


def _one_line_about(out, name: str, needle: str) -> str:
    lines = [l for l in out.stderr.splitlines() if name in l]
    assert len(lines) == 1, out.output
    assert needle in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------
# syntax and encodings


def test_syntax_error_is_a_finding_with_the_parsers_line(project):
    (project / "broken.py").write_text("import torch\n\ndef f(x:\n    return x\n")
    out = cli("check", str(project))
    assert out.code == 1
    line = [l for l in out.stdout.splitlines() if "broken.py" in l]
    assert len(line) == 1, out.output
    # CPython's own position and message (libcst's native parser is a line late)
    assert "broken.py:3:" in line[0] and "DL000" in line[0] and "SyntaxError" in line[0], line
    try:
        compile((project / "broken.py").read_text(), "broken.py", "exec")
    except SyntaxError as exc:
        assert exc.msg in line[0]
    _still_checked(out)


def test_syntax_error_file_is_left_alone_by_fix(project):
    src = b"import torch\r\ndef f(:\r\n    torch.zeros(3)\r\n"
    (project / "broken.py").write_bytes(src)
    out = cli("fix", "--apply", str(project))
    assert out.code == 1
    assert (project / "broken.py").read_bytes() == src
    assert (project / GOOD_FILE).read_text() == FIXED


def test_invalid_utf8(project):
    (project / "bytes.py").write_bytes(b"import torch\nname = '\xff\xfe caf\xe9'\n")
    out = cli("check", str(project))
    assert out.code == 1
    _one_line_about(out, "bytes.py", "not valid utf-8")
    _still_checked(out)
    before = (project / "bytes.py").read_bytes()
    assert cli("fix", "--apply", str(project)).code == 1
    assert (project / "bytes.py").read_bytes() == before


def test_unknown_coding_cookie(project):
    (project / "cookie.py").write_bytes(b"# -*- coding: klingon -*-\nimport torch\n")
    out = cli("check", str(project))
    assert out.code == 1
    _one_line_about(out, "cookie.py", "klingon")
    _still_checked(out)


def test_pep263_latin1_cookie_is_checked_and_fixed_in_latin1(tmp_path):
    src = ("# -*- coding: latin-1 -*-\n# Modèle écrit à Paris\n" + BUG).encode("latin-1")
    f = tmp_path / "latin.py"
    f.write_bytes(src)
    out = cli("check", str(f))
    assert out.code == 1 and f"latin.py:{BUG_LINE + 2}:" in out.stdout, out.output
    assert cli("fix", "--apply", str(f)).code == 0
    assert f.read_bytes() == src.replace(BUGGY_CALL.encode(), FIXED_CALL.encode())
    assert b"\xe8" in f.read_bytes()  # è is still one latin-1 byte


def test_utf8_bom_is_kept(tmp_path):
    f = tmp_path / "bom.py"
    src = b"\xef\xbb\xbf" + BUG.encode()
    f.write_bytes(src)
    out = cli("check", str(f))
    assert f"bom.py:{BUG_LINE}:" in out.stdout
    assert cli("fix", "--apply", str(f)).code == 0
    assert f.read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()


@pytest.mark.parametrize(
    "newline_for_line",
    [
        lambda i: "\r\n",  # CRLF
        lambda i: "\r\n" if i % 2 else "\n",  # mixed
        lambda i: "\r" if i % 3 == 1 else "\n",  # even old-Mac CRs in between
    ],
    ids=["crlf", "mixed", "with-cr"],
)
def test_line_endings_are_kept_byte_for_byte(tmp_path, newline_for_line):
    lines = BUG.splitlines()
    src = "".join(line + newline_for_line(i) for i, line in enumerate(lines)).encode()
    f = tmp_path / "endings.py"
    f.write_bytes(src)
    out = cli("check", str(f))
    # (libcst does not count a lone CR as a line break, Python does: the line
    # number is libcst's there; the bytes are what matters below)
    assert "endings.py:" in out.stdout and "DL001" in out.stdout, out.output
    assert cli("fix", "--apply", str(f)).code == 0
    assert f.read_bytes() == src.replace(BUGGY_CALL.encode(), FIXED_CALL.encode())


def test_cr_only_file_is_not_rewritten(tmp_path):
    # libcst drops the final CR of a CR-only file: devlint must refuse to fix
    # rather than change bytes it did not mean to change
    f = tmp_path / "mac.py"
    src = BUG.replace("\n", "\r").encode()
    f.write_bytes(src)
    out = cli("fix", "--apply", str(f))
    assert out.code == 1
    _one_line_about(out, "mac.py", "byte for byte")
    assert f.read_bytes() == src


def test_tabs(tmp_path):
    src = BUG.replace("    ", "\t").replace("x + ", "x +\t")
    f = tmp_path / "tabs.py"
    f.write_text(src)
    assert f"tabs.py:{BUG_LINE}:" in cli("check", str(f)).stdout
    assert cli("fix", "--apply", str(f)).code == 0
    assert f.read_text() == src.replace(BUGGY_CALL, FIXED_CALL)


def test_inconsistent_tabs_is_a_syntax_error(project):
    (project / "taberr.py").write_text("import torch\nif True:\n        x = 1\n\ty = 2\n")
    out = cli("check", str(project))
    assert out.code == 1
    assert "taberr.py:4:" in out.stdout and "DL000" in out.stdout, out.output
    _still_checked(out)


def test_empty_and_blank_files(tmp_path):
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "blank.py").write_bytes(b"\n\n\r\n")
    (tmp_path / "bom_only.py").write_bytes(b"\xef\xbb\xbf")
    (tmp_path / "torch_only.py").write_bytes(b"import torch")  # no final newline
    out = cli("check", str(tmp_path))
    assert out.code == 0 and out.stderr == "", out.output
    assert cli("fix", "--apply", str(tmp_path)).code == 0
    assert (tmp_path / "torch_only.py").read_bytes() == b"import torch"


def test_binary_file_with_python_suffix(project):
    (project / "blob.py").write_bytes(b"\x00\x01\x02torch" * 100)
    out = cli("check", str(project))
    assert out.code == 1
    _one_line_about(out, "blob.py", "binary")
    _still_checked(out)


def test_python2_source(project):
    (project / "old.py").write_text('import torch\n\nprint "loss", loss\n')
    out = cli("check", str(project))
    assert out.code == 1
    line = [l for l in out.stdout.splitlines() if "old.py" in l]
    assert len(line) == 1 and "old.py:3:" in line[0] and "DL000" in line[0], out.output
    assert "Missing parentheses" in line[0]
    _still_checked(out)


NEWER_SYNTAX = [
    "type Pair = tuple[int, int]\n",  # 3.12
    "def first[T](xs: list[T]) -> T:\n    return xs[0]\n",  # 3.12
    "def pick[T = int](x: T) -> T:\n    return x\n",  # 3.13
    "try:\n    pass\nexcept ValueError, TypeError:\n    pass\n",  # 3.14
    'greeting = t"hello {name}"\n',  # 3.14
]


@pytest.mark.parametrize("snippet", NEWER_SYNTAX, ids=["type-alias", "generic-def", "type-default", "except-no-parens", "t-string"])
def test_source_newer_than_this_python_is_still_checked(tmp_path, snippet):
    f = tmp_path / "new.py"
    f.write_text(BUG + "\n\n" + snippet)
    out = cli("check", str(f))
    assert out.code == 1 and f"new.py:{BUG_LINE}:" in out.stdout and "DL000" not in out.stdout, out.output
    assert cli("fix", "--apply", str(f)).code == 0
    assert f.read_text() == FIXED + "\n\n" + snippet


def test_newer_syntax_that_the_parser_cannot_read_names_it(monkeypatch, tmp_path):
    # when libcst refuses code that this Python accepts, the message says so
    import libcst

    import devlint.engine as engine

    def refuse(text):
        raise libcst.ParserSyntaxError("unsupported", lines=["x"], raw_line=1, raw_column=0)

    monkeypatch.setattr(engine, "parse", refuse)
    f = tmp_path / "ok.py"
    f.write_text(BUG)
    out = cli("check", "-j", "1", str(f))
    assert out.code == 1 and "DL000" in out.stdout and "devlint's parser cannot read this" in out.stdout, out.output


# --------------------------------------------------------------------------
# paths


def test_path_that_does_not_exist(project):
    out = cli("check", str(project), str(project / "nope.py"))
    assert out.code == 2
    _one_line_about(out, "nope.py", "no such file or directory")
    _still_checked(out)
    assert "All checks passed" not in out.output


def test_path_that_does_not_exist_alone_subprocess(tmp_path):
    out = run("check", "missing_dir", cwd=tmp_path)
    assert out.code == 2
    _one_line_about(out, "missing_dir", "no such file or directory")
    assert "All checks passed" not in out.output


def test_non_python_file_named_explicitly(project):
    (project / "notes.txt").write_text("torch is great\n")
    out = cli("check", str(project / "notes.txt"), str(project / GOOD_FILE))
    assert out.code == 1
    _one_line_about(out, "notes.txt", "not a Python file")
    _still_checked(out)


def test_script_with_python_shebang_is_checked(tmp_path):
    f = tmp_path / "train"
    f.write_text("#!/usr/bin/env python3\n" + BUG)
    out = cli("check", str(f))
    assert out.code == 1 and f"train:{BUG_LINE + 1}:" in out.stdout, out.output


def test_folder_walk_ignores_non_python_files(project):
    (project / "notes.txt").write_text("torch\x00")
    out = cli("check", str(project))
    assert "notes.txt" not in out.output
    _still_checked(out)


def test_broken_symlink(project):
    (project / "dangling.py").symlink_to(project / "gone.py")
    for args in ((str(project),), (str(project / "dangling.py"), str(project / GOOD_FILE))):
        out = cli("check", *args)
        assert out.code == 1
        _one_line_about(out, "dangling.py", "broken symbolic link")
        _still_checked(out)


def test_symlink_loop(project):
    (project / "a.py").symlink_to(project / "b.py")
    (project / "b.py").symlink_to(project / "a.py")
    (project / "sub").mkdir()
    (project / "sub" / "up").symlink_to(project)  # a folder loop
    out = cli("check", str(project))
    assert out.code == 1
    _one_line_about(out, "a.py", "symlink loop")
    _one_line_about(out, "b.py", "symlink loop")
    _still_checked(out)
    out = run("check", str(project / "a.py"), str(project / GOOD_FILE))  # named: config lookup too
    assert out.code == 1
    _one_line_about(out, "a.py", "symlink loop")
    _still_checked(out)


def test_fix_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "real.py"
    real.write_text(BUG)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    assert cli("fix", "--apply", str(link)).code == 0
    assert link.is_symlink() and real.read_text() == FIXED


# --------------------------------------------------------------------------
# permissions. Tests run as root here and in CI, and root reads everything:
# the operating system's answer is simulated in-process, and the real thing
# runs as `nobody` (setpriv) where that is possible.


def _deny(monkeypatch, victim: Path, where) -> None:
    import builtins

    real_open, real_scandir = builtins.open, os.scandir

    def guarded_open(file, *a, **k):
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) == str(victim):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *a, **k)

    def guarded_scandir(path="."):
        if os.path.abspath(path) == str(victim):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    if where == "open":
        monkeypatch.setattr(builtins, "open", guarded_open)
    else:
        monkeypatch.setattr(os, "scandir", guarded_scandir)


def test_file_without_read_permission(project, monkeypatch):
    f = project / "secret.py"
    f.write_text(BUG)
    f.chmod(0)
    _deny(monkeypatch, f, "open")
    out = cli("check", "-j", "1", str(project))
    assert out.code == 1
    _one_line_about(out, "secret.py", "permission denied")
    _still_checked(out)


def test_folder_without_read_permission(project, monkeypatch):
    d = project / "locked"
    d.mkdir()
    (d / "inside.py").write_text(BUG)
    _deny(monkeypatch, d, "scandir")
    out = cli("check", "-j", "1", str(project))
    assert out.code == 1
    _one_line_about(out, "locked", "permission denied")
    _still_checked(out)


def _as_nobody():
    """A command prefix that runs as an unprivileged user, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return [] if hasattr(os, "geteuid") else None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    try:
        probe = subprocess.run([*prefix, sys.executable, "-c", "import devlint"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if probe.returncode == 0 else None


@pytest.fixture
def open_tmp():
    """A scratch folder that any user can enter (pytest's own is root-only)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="devlint-perm-"))
    folder.chmod(0o755)
    yield folder
    for dirpath, dirnames, _ in os.walk(folder):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(folder, ignore_errors=True)


def test_permissions_for_real_as_an_unprivileged_user(open_tmp):
    prefix = _as_nobody()
    if prefix is None:
        pytest.skip("cannot run as an unprivileged user here")
    tmp_path = open_tmp
    (tmp_path / GOOD_FILE).write_text(BUG)
    (tmp_path / GOOD_FILE).chmod(0o666)
    (tmp_path / "secret.py").write_text(BUG)
    (tmp_path / "secret.py").chmod(0)
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "inside.py").write_text(BUG)
    (tmp_path / "locked").chmod(0)
    try:
        out = run("check", "-j", "1", str(tmp_path), prefix=prefix)
        assert out.code == 1
        _one_line_about(out, "secret.py", "permission denied")
        _one_line_about(out, "locked", "permission denied")
        _still_checked(out)
        # a file that cannot be written is reported and left as it was
        ro = tmp_path / "readonly"
        ro.mkdir()
        (ro / "model.py").write_text(BUG)
        (ro / "model.py").chmod(0o644)
        ro.chmod(0o755)  # nobody cannot create the temporary file here
        out = run("fix", "--apply", "-j", "1", str(ro / "model.py"), prefix=prefix)
        assert out.code == 1
        _one_line_about(out, "model.py", "cannot write")
        assert (ro / "model.py").read_text() == BUG
        assert os.listdir(ro) == ["model.py"]
    finally:
        (tmp_path / "locked").chmod(0o755)


# --------------------------------------------------------------------------
# configuration


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"[tool.devlint\nselect = 1\n", "invalid TOML"),
        (b"[tool.devlint]\nselect = 'DL001'\n", "'select' must be a list of strings"),
        (b"[tool.devlint]\nunsafe-fixes = 'yes'\n", "'unsafe-fixes' must be true or false"),
        (b"[tool.devlint]\nper-file-ignores = { 'a.py' = 'DL001' }\n", "'per-file-ignores' must be a table"),
        (b"[tool.devlint]\nselect = ['DL9']\n", "unknown rule code 'DL9'"),
        (b"[tool.devlint]\ncolour = true\n", "unknown key 'colour'"),
        (b"[tool]\ndevlint = 3\n", "[tool.devlint] must be a table"),
        (b"tool = 1\n", "[tool] must be a table"),
        (b"[tool.devlint]\nselect = ['\xff']\n", "not UTF-8"),
    ],
    ids=["not-toml", "select-str", "bool-str", "pfi-str", "unknown-code", "unknown-key", "tool-devlint-int", "tool-int", "not-utf8"],
)
def test_bad_pyproject(project, content, needle):
    (project / "pyproject.toml").write_bytes(content)
    for out in (cli("check", str(project)), run("check", str(project))):
        assert out.code == 2
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "pyproject.toml" in lines[0] and needle in lines[0], out.output


def test_config_file_that_does_not_exist(project):
    out = cli("check", "--config", str(project / "nope.toml"), str(project))
    assert out.code == 2 and "nope.toml" in out.stderr


# --------------------------------------------------------------------------
# big and hostile files: bounded time, no crash


def _generated(n_bytes: int) -> str:
    chunk = BUG + "\n\ndef helper_{i}(a, b):\n    return torch.stack([a, b]).sum(0) * {i}\n"
    parts, size, i = [], 0, 0
    while size < n_bytes:
        part = chunk.replace("{i}", str(i)).replace("class Net", f"class Net{i}")
        parts.append(part)
        size += len(part)
        i += 1
    return "".join(parts)


def test_ten_megabyte_generated_file_is_skipped_quickly(project):
    (project / "generated.py").write_text(_generated(10_000_000))
    start = time.monotonic()
    out = run("check", str(project))
    assert time.monotonic() - start < 60
    assert out.code == 1
    _one_line_about(out, "generated.py", "file too large")
    _still_checked(out)


def test_big_file_without_torch_costs_nothing(tmp_path):
    (tmp_path / "table.py").write_text("DATA = [\n" + "    1,\n" * 2_000_000 + "]\n")
    start = time.monotonic()
    out = cli("check", str(tmp_path))
    assert out.code == 0 and time.monotonic() - start < 20


HOSTILE = {
    "parens-10k": "import torch\nx = " + "(" * 10_000 + "1" + ")" * 10_000 + "\n",
    "brackets-10k": "import torch\nx = " + "[" * 10_000 + "]" * 10_000 + "\n",
    "calls-5k": "import torch\nx = " + "f(" * 5_000 + ")" * 5_000 + "\n",
    "sum-50k": "import torch\nx = " + "+".join(["a"] * 50_000) + "\n",  # a 100 000-character line
    "attribute-chain": "import torch\nx = torch" + ".a" * 50_000 + "\n",
    "subscripts": "import torch\nx = t" + "[0]" * 5_000 + "\n",
    "unary": "import torch\nx = " + "-" * 100_000 + "1\n",
    "not-chain": "import torch\nx = " + "not " * 20_000 + "a\n",
    "lambdas": "import torch\nf = " + "lambda: " * 10_000 + "0\n",
    "million-literal": "import torch\nx = [" + ",".join(["0"] * 1_000_000) + "]\n",
}


def test_hostile_files_are_skipped_with_a_message_in_bounded_time(tmp_path):
    (tmp_path / GOOD_FILE).write_text(BUG)
    for name, text in HOSTILE.items():
        # each also holds a bug, so that devlint must parse it with libcst
        (tmp_path / f"hostile_{name}.py").write_text(BUG + "\n\n" + text)
    before = {p.name: p.read_bytes() for p in tmp_path.glob("hostile_*.py")}
    start = time.monotonic()
    out = run("check", "-j", "1", str(tmp_path))  # a subprocess: a native stack overflow would be a signal
    assert time.monotonic() - start < 60, "hostile files must cost bounded time"
    assert out.code == 1
    for name in HOSTILE:
        _one_line_about(out, f"hostile_{name}.py", "skipped")
    _still_checked(out)
    out = run("fix", "--apply", "-j", "1", str(tmp_path))
    assert {p.name: p.read_bytes() for p in tmp_path.glob("hostile_*.py")} == before
    assert (tmp_path / GOOD_FILE).read_text() == FIXED


def test_hostile_file_that_no_rule_can_fire_on_is_checked_by_the_scan_alone(tmp_path):
    # CPython's parser takes these in its stride; the candidate scan sees that
    # no rule can fire, so libcst (which would choke) never parses them and
    # there is nothing to say about them
    (tmp_path / GOOD_FILE).write_text(BUG)
    for name in ("sum-50k", "attribute-chain", "subscripts"):
        (tmp_path / f"hostile_{name}.py").write_text(HOSTILE[name])
    start = time.monotonic()
    out = run("check", "-j", "1", str(tmp_path))
    assert time.monotonic() - start < 60
    assert out.code == 1 and out.stderr == "", out.output
    _still_checked(out)


LEGAL_AND_DEEP = {
    # as deep as CPython itself accepts: checked, not skipped
    "brackets-190": "x = " + "[" * 190 + "]" * 190 + "\n",
    "parens-150-around-a-call": "y = " + "(" * 150 + "torch.zeros(3)" + ")" * 150 + "\n",
    "elif-1000": "if a:\n    pass\n" + "elif a:\n    pass\n" * 1_000,
    "long-string-line": "s = '" + "x" * 100_000 + "'\n",  # a 100 000-character line
    "sum-400": "z = " + " + ".join(["torch.zeros(3)"] * 400) + "\n",
    "indent-90": "".join(" " * i + "if x:\n" for i in range(90)) + " " * 90 + "pass\n",
}


def test_deep_but_legal_code_is_checked_and_fixed(tmp_path):
    for name, snippet in LEGAL_AND_DEEP.items():
        (tmp_path / f"deep_{name}.py").write_text(BUG + "\n\n" + snippet)
    start = time.monotonic()
    out = run("check", "-j", "1", str(tmp_path))
    assert time.monotonic() - start < 60
    assert out.stderr == "" and out.code == 1 and "DL000" not in out.stdout, out.output
    for name in LEGAL_AND_DEEP:
        assert f"deep_{name}.py:{BUG_LINE}:" in out.stdout, name
    assert run("fix", "--apply", "-j", "1", str(tmp_path)).code == 0
    for name, snippet in LEGAL_AND_DEEP.items():
        assert (tmp_path / f"deep_{name}.py").read_text() == FIXED + "\n\n" + snippet, name


def test_deeply_nested_code_inside_forward_is_fixed(tmp_path):
    # the fixer's own traversal must cope with depth too
    inner = "(" * 120 + "torch.zeros(3)" + ")" * 120
    f = tmp_path / "deep.py"
    f.write_text(BUG.replace(BUGGY_CALL, inner))
    out = run("fix", "--apply", str(f))
    assert out.code == 0, out.output
    assert f.read_text() == BUG.replace(BUGGY_CALL, inner.replace(BUGGY_CALL, FIXED_CALL))


def test_verbose_adds_detail_but_no_traceback(project):
    (project / "bytes.py").write_bytes(b"\xff")
    out = cli("check", "--verbose", str(project))
    assert out.code == 1 and "checked" in out.stderr
    _still_checked(out)
