"""``devlint server``, the language server, driven by a real LSP client: the
server runs as ``python -m devlint server`` in a subprocess and the tests
exchange JSON-RPC messages with it over its stdin / stdout (the framing of
the LSP base protocol, written here so that the test sees exactly the bytes
an editor would)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

from conftest import FIXTURES, ROOT


def _needs_pygls() -> None:
    try:
        import pygls.lsp.server  # noqa: F401
    except ImportError:
        pytest.skip("the language server needs pygls 2 (pip install 'devlint[lsp]')")


TIMEOUT = 30
#: a save is checked at once; a change after the debounce delay (0.3 s)
DEBOUNCE_SLACK = 10

BUG = (
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "\n"
    "class Head(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.lin = nn.Linear(4, 4)\n"
    "\n"
    "    def forward(self, x):\n"
    '        label = "naïve 😀"; return self.lin(x) + torch.zeros(4)\n'
)
BUG_LINE = 10  # 0-based
CLEAN = BUG.replace("torch.zeros(4)", "x")


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("DEVLINT_CACHE_DIR", None)
    return env


class Client:
    """A minimal LSP client over a subprocess's pipes."""

    def __init__(self, cwd: Path, env: Optional[Dict[str, str]] = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "devlint", "server"],
            cwd=str(cwd),
            env=env or _env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.inbox: "queue.Queue[Optional[dict]]" = queue.Queue()
        self.notifications: List[dict] = []
        self.server_requests: List[dict] = []
        self.next_id = 0
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    # -- framing -------------------------------------------------------------
    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode("ascii").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = out.read(int(headers["content-length"]))
            self.inbox.put(json.loads(body.decode("utf-8")))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def send(self, message: dict) -> None:
        message = {"jsonrpc": "2.0", **message}
        body = json.dumps(message).encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def _next(self, deadline: float) -> dict:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no message from the server in time; stderr: {self.stderr[-2000:]!r}")
        try:
            msg = self.inbox.get(timeout=left)
        except queue.Empty:
            raise TimeoutError(f"no message from the server in time; stderr: {self.stderr[-2000:]!r}") from None
        if msg is None:
            raise EOFError(f"the server closed its output; stderr: {self.stderr[-2000:]!r}")
        if "method" in msg and "id" in msg:  # a request from the server
            self.server_requests.append(msg)
            result: Any = None
            if msg["method"] == "workspace/applyEdit":
                result = {"applied": True}
            self.send({"id": msg["id"], "result": result})
        elif "method" in msg:
            self.notifications.append(msg)
        return msg

    def request(self, method: str, params: Any, timeout: float = TIMEOUT) -> Any:
        self.next_id += 1
        my_id = self.next_id
        self.send({"id": my_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            msg = self._next(deadline)
            if msg.get("id") == my_id and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result")

    def wait_for(self, method: str, where: Callable[[dict], bool] = lambda p: True, timeout: float = TIMEOUT) -> dict:
        """The params of the first notification ``method`` (received already,
        not yet taken, or coming) that ``where`` accepts."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for i, n in enumerate(self.notifications[seen:], start=seen):
                if n["method"] == method and where(n["params"]):
                    del self.notifications[i]
                    return n["params"]
            seen = len(self.notifications)
            self._next(deadline)

    def diagnostics(self, uri: str, version: Optional[int] = None, timeout: float = TIMEOUT) -> List[dict]:
        def match(p: dict) -> bool:
            return p["uri"] == uri and (version is None or p.get("version") == version)

        return self.wait_for("textDocument/publishDiagnostics", match, timeout)["diagnostics"]

    # -- a session -------------------------------------------------------------
    def initialize(self, root: Path, capabilities: Optional[dict] = None) -> dict:
        result = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "capabilities": capabilities
                or {
                    "workspace": {"applyEdit": True, "didChangeWatchedFiles": {"dynamicRegistration": True}},
                    "textDocument": {"publishDiagnostics": {"versionSupport": True}},
                    "notebookDocument": {"synchronization": {}},
                },
            },
        )
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str, version: int = 1) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}})
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})

    def close(self) -> int:
        try:
            if self.proc.poll() is None:
                self.request("shutdown", None)
                self.notify("exit", None)
            code = self.proc.wait(timeout=TIMEOUT)
            self._stderr_reader.join(timeout=TIMEOUT)
            # nothing went wrong on the server's side (a handler that raised)
            assert b"Traceback" not in self.stderr and b"Error" not in self.stderr, self.stderr.decode(errors="replace")
            return code
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def apply_edits(text: str, edits: List[dict]) -> str:
    """``text`` with LSP ``TextEdit``s applied (positions in UTF-16 units)."""
    lines = text.split("\n")

    def offset(pos: dict) -> int:
        line = pos["line"]
        if line >= len(lines):
            return len(text)
        before = sum(len(l) + 1 for l in lines[:line])
        units = 0
        for i, ch in enumerate(lines[line]):
            if units >= pos["character"]:
                return before + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return before + len(lines[line])

    spans = sorted(((offset(e["range"]["start"]), offset(e["range"]["end"]), e["newText"]) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def devlint_fix_apply(folder: Path, name: str, text: str) -> str:
    """What ``devlint fix --apply`` makes of ``text`` as ``folder/name``."""
    scratch = folder / "_cli"
    scratch.mkdir(exist_ok=True)
    target = scratch / name
    target.write_text(text, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "devlint", "fix", "--apply", "--no-cache", str(target)], cwd=str(folder), env=_env(),
                   capture_output=True, check=False)
    return target.read_text(encoding="utf-8")


@pytest.fixture
def workspace(tmp_path):
    _needs_pygls()
    (tmp_path / "pyproject.toml").write_text("[tool.devlint]\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def client(workspace):
    c = Client(workspace)
    c.initialize(workspace)
    yield c
    c.close()


def _at(diags: List[dict], code: str) -> dict:
    found = [d for d in diags if d["code"] == code]
    assert found, diags
    return found[0]


# --------------------------------------------------------------------------


def test_initialize_advertises_the_features(workspace):
    c = Client(workspace)
    try:
        caps = c.initialize(workspace)["capabilities"]
        assert caps["codeActionProvider"]["codeActionKinds"] == ["quickfix", "source.fixAll", "source.fixAll.devlint"]
        assert caps["hoverProvider"]
        assert caps["executeCommandProvider"]["commands"] == ["devlint.applyAutofix"]
        assert caps["textDocumentSync"]["openClose"] and caps["textDocumentSync"]["change"] == 2
        assert caps["notebookDocumentSync"]["notebookSelector"][0]["notebook"] == "jupyter-notebook"
        # the watcher of pyproject.toml files, registered dynamically
        deadline = time.monotonic() + TIMEOUT
        while not any(r["method"] == "client/registerCapability" for r in c.server_requests):
            c._next(deadline)
        reg = next(r for r in c.server_requests if r["method"] == "client/registerCapability")["params"]["registrations"][0]
        assert reg["method"] == "workspace/didChangeWatchedFiles"
        assert [w["globPattern"] for w in reg["registerOptions"]["watchers"]] == ["**/pyproject.toml", "**/.devlint_cache/results-*.json"]
    finally:
        assert c.close() == 0


def test_diagnostics_on_open_and_change(client, workspace):
    uri = client.open(workspace / "head.py", BUG)
    diags = client.diagnostics(uri, version=1)
    d = _at(diags, "DL001")
    assert len(diags) == 1
    assert d["source"] == "devlint"
    assert d["severity"] == 2  # warning
    assert d["codeDescription"]["href"] == (ROOT / "docs" / "rules.md").resolve().as_uri() + "#dl001"
    # the CLI says line 11, columns 49-63 in code points; "😀" is two UTF-16 units
    line = BUG.split("\n")[BUG_LINE]
    col = line.index("torch.zeros(4)")
    assert col == 48
    assert d["range"] == {"start": {"line": BUG_LINE, "character": col + 1}, "end": {"line": BUG_LINE, "character": col + 1 + 14}}
    # saved: checked again at once (no debounce)
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert [x["code"] for x in client.diagnostics(uri, version=1, timeout=DEBOUNCE_SLACK)] == ["DL001"]
    # the bug removed: empty diagnostics for the new version
    client.change(uri, CLEAN, 2)
    assert client.diagnostics(uri, version=2) == []
    # and back
    client.change(uri, BUG, 3)
    assert [x["code"] for x in client.diagnostics(uri, version=3)] == ["DL001"]
    # a syntax error is an error, with no rule page to link to
    client.change(uri, BUG + "def broken(:\n", 4)
    (d,) = client.diagnostics(uri, version=4)
    assert d["code"] == "DL000" and d["severity"] == 1 and "codeDescription" not in d
    assert d["range"]["start"]["line"] == len(BUG.split("\n")) - 1


def test_only_python_documents_are_checked(client, workspace):
    notes = (workspace / "notes.md").as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": notes, "languageId": "markdown", "version": 1,
                                                            "text": "# torch.zeros(3) is not code here\n"}})
    uri = client.open(workspace / "head.py", BUG)
    assert [d["code"] for d in client.diagnostics(uri, version=1)] == ["DL001"]
    # one worker, first in first out: a check of the markdown file would have come first
    assert not any(n["method"] == "textDocument/publishDiagnostics" and n["params"]["uri"] == notes for n in client.notifications)
    assert client.request("textDocument/codeAction", {"textDocument": {"uri": notes}, "range": {"start": {"line": 0, "character": 0},
                          "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}}) == []


def test_utf8_positions_when_the_client_asks(workspace):
    c = Client(workspace)
    try:
        result = c.initialize(workspace, {"general": {"positionEncodings": ["utf-8", "utf-16"]}})
        assert result["capabilities"]["positionEncoding"] == "utf-8"
        uri = c.open(workspace / "head.py", BUG)
        d = _at(c.diagnostics(uri, version=1), "DL001")
        line = BUG.split("\n")[BUG_LINE]
        start = len(line[: line.index("torch.zeros(4)")].encode("utf-8"))
        assert start == 48 + 1 + 3  # "ï" takes two bytes, "😀" four
        assert d["range"]["start"] == {"line": BUG_LINE, "character": start}
        assert d["range"]["end"] == {"line": BUG_LINE, "character": start + 14}
    finally:
        assert c.close() == 0


def test_changes_are_debounced_latest_text_wins(client, workspace):
    uri = client.open(workspace / "typing.py", CLEAN)
    assert client.diagnostics(uri, version=1) == []
    for v in range(2, 12):  # ten keystrokes, well within the debounce delay
        client.change(uri, BUG if v % 2 else CLEAN, v)
    client.change(uri, BUG, 12)
    last = client.wait_for("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)
    assert last["version"] == 12  # no publication for the intermediate versions
    assert [d["code"] for d in last["diagnostics"]] == ["DL001"]


def test_slow_checks_while_typing_publish_the_latest_text(client, workspace):
    """Keystrokes slower than the debounce delay but faster than a check:
    each running check's result is out of date when it ends and is dropped;
    the checks waiting meanwhile collapse into one; the last text is
    published."""
    big = "import torch\nimport torch.nn as nn\n" + "".join(
        f"\n\nclass H{i}(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(4)\n" for i in range(150)
    )
    uri = client.open(workspace / "big.py", big)
    assert len(client.diagnostics(uri, version=1)) == 150
    for v in range(2, 8):
        client.change(uri, big + "#" * v + "\n", v)
        time.sleep(0.4)
    client.change(uri, big[: big.index("\n\n\nclass H1(")] + "\n", 8)  # one class left
    assert len(client.diagnostics(uri, version=8)) == 1
    published = [n["params"].get("version") for n in client.notifications if n["method"] == "textDocument/publishDiagnostics"]
    assert all(v is not None and v < 8 for v in published)  # nothing published after the last text's


def test_a_long_check_does_not_block_the_server(client, workspace):
    small = client.open(workspace / "small.py", BUG)
    d = _at(client.diagnostics(small, version=1), "DL001")
    big_text = "import torch\nimport torch.nn as nn\n" + "".join(
        f"\n\nclass Head{i}(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.lin = nn.Linear(4, 4)\n\n"
        f"    def forward(self, x):\n        return self.lin(x) + torch.zeros(4)\n"
        for i in range(300)
    )
    big = client.open(workspace / "big.py", big_text)  # seconds of checking
    started = time.monotonic()
    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": small}, "range": d["range"],
                                                         "context": {"diagnostics": [d], "only": ["quickfix"]}})
    hover = client.request("textDocument/hover", {"textDocument": {"uri": small}, "position": d["range"]["start"]})
    assert hover["contents"]["value"].startswith("**DL001 ")
    answered = time.monotonic() - started
    assert any(a["title"].startswith("DL001:") for a in actions)
    # answered while the big file was still being checked
    assert not any(n["method"] == "textDocument/publishDiagnostics" and n["params"]["uri"] == big for n in client.notifications), answered
    assert len(client.diagnostics(big, version=1)) == 300


def test_quickfix_equals_devlint_fix_apply(client, workspace):
    uri = client.open(workspace / "head.py", BUG)
    d = _at(client.diagnostics(uri, version=1), "DL001")
    actions = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": d["range"], "context": {"diagnostics": [d], "only": ["quickfix"]}},
    )
    fixes = [a for a in actions if a["title"].startswith("DL001:")]
    assert len(fixes) == 1
    fix = fixes[0]
    assert fix["kind"] == "quickfix" and fix["isPreferred"] is True
    assert "(unsafe)" not in fix["title"]
    assert fix["diagnostics"][0]["code"] == "DL001"
    fixed = apply_edits(BUG, fix["edit"]["changes"][uri])
    assert fixed == devlint_fix_apply(workspace, "head.py", BUG)
    assert "torch.zeros(4, device=self.lin.weight.device)" in fixed


UNSAFE = (
    "import torch\n"
    "from torch.nn import Conv2d, Module\n"
    "\n"
    "\n"
    "class Pyramid(Module):\n"
    "    def __init__(self, levels=3):\n"
    "        super().__init__()\n"
    "        convs = []\n"
    "        for _ in range(levels):\n"
    "            convs.append(Conv2d(8, 8, 3, padding=1))\n"
    "        self.convs = convs\n"
    "\n"
    "    def forward(self, feats):\n"
    "        return [conv(f) for conv, f in zip(self.convs, feats)]\n"
)


def test_crlf_buffer(client, workspace):
    crlf = BUG.replace("\n", "\r\n")
    uri = client.open(workspace / "dos.py", crlf)
    d = _at(client.diagnostics(uri, version=1), "DL001")
    assert d["range"]["start"]["line"] == BUG_LINE
    actions = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": d["range"], "context": {"diagnostics": [d]}},
    )
    fix = next(a for a in actions if a["title"].startswith("DL001:"))
    expected = devlint_fix_apply(workspace, "head.py", BUG).replace("\n", "\r\n")
    assert apply_edits(crlf, fix["edit"]["changes"][uri]) == expected
    fix_all = next(a for a in actions if a["kind"] == "source.fixAll.devlint")
    assert apply_edits(crlf, fix_all["edit"]["documentChanges"][0]["edits"]) == expected


def test_unsafe_fix_is_labelled_and_left_out_of_fix_all(client, workspace):
    uri = client.open(workspace / "pyramid.py", UNSAFE)
    d = _at(client.diagnostics(uri, version=1), "DL007")
    assert d["message"].endswith("(unsafe fix available)")
    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": d["range"], "context": {"diagnostics": [d]}})
    fix = next(a for a in actions if a["title"].startswith("DL007:"))
    assert fix["title"].endswith("(unsafe)") and fix["isPreferred"] is False
    assert not any(a["kind"].startswith("source.fixAll") for a in actions)  # nothing safe to fix
    scratch = workspace / "_cli_unsafe.py"
    scratch.write_text(UNSAFE, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "devlint", "fix", "--apply", "--unsafe-fixes", "--no-cache", str(scratch)],
                   cwd=str(workspace), env=_env(), capture_output=True, check=False)
    assert apply_edits(UNSAFE, fix["edit"]["changes"][uri]) == scratch.read_text(encoding="utf-8") != UNSAFE


def test_noqa_action(client, workspace):
    uri = client.open(workspace / "head.py", BUG)
    d = _at(client.diagnostics(uri, version=1), "DL001")
    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": d["range"], "context": {"diagnostics": [d]}})
    noqa = next(a for a in actions if a["title"] == "Disable DL001 for this line")
    assert noqa["kind"] == "quickfix"
    new = apply_edits(BUG, noqa["edit"]["changes"][uri])
    assert new.split("\n")[BUG_LINE] == BUG.split("\n")[BUG_LINE] + "  # noqa: DL001"
    client.change(uri, new, 2)
    assert client.diagnostics(uri, version=2) == []
    # a line with a noqa comment already: the code is merged into it
    other = BUG.replace("torch.zeros(4)\n", "torch.zeros(4)  # noqa: E501 (long)\n")
    client.change(uri, other, 3)
    d = _at(client.diagnostics(uri, version=3), "DL001")
    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": d["range"], "context": {"diagnostics": [d]}})
    noqa = next(a for a in actions if a["title"] == "Disable DL001 for this line")
    assert apply_edits(other, noqa["edit"]["changes"][uri]).split("\n")[BUG_LINE].endswith("# noqa: E501, DL001 (long)")


def test_source_fix_all(client, workspace):
    two = BUG + "\n\nclass Tail(nn.Module):\n    def forward(self, x):\n        return x * torch.ones(3)\n"
    uri = client.open(workspace / "two.py", two)
    assert len(client.diagnostics(uri, version=1)) == 2
    actions = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
         "context": {"diagnostics": [], "only": ["source.fixAll"]}},
    )
    assert [a["kind"] for a in actions] == ["source.fixAll.devlint"]
    assert actions[0]["title"] == "Fix all safe devlint problems"
    change = actions[0]["edit"]["documentChanges"][0]
    assert change["textDocument"] == {"uri": uri, "version": 1}
    assert apply_edits(two, change["edits"]) == devlint_fix_apply(workspace, "two.py", two)


def test_source_fix_all_resolved_lazily(workspace):
    """A client that resolves code actions gets the fix-all action without
    its edit (fixing costs a run of the fixer) and the edit on resolve."""
    c = Client(workspace)
    try:
        c.initialize(workspace, {
            "workspace": {"applyEdit": True},
            "textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}}},
        })
        uri = c.open(workspace / "head.py", BUG)
        c.diagnostics(uri, version=1)
        actions = c.request(
            "textDocument/codeAction",
            {"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
             "context": {"diagnostics": [], "only": ["source.fixAll.devlint"]}},
        )
        assert len(actions) == 1 and "edit" not in actions[0]
        resolved = c.request("codeAction/resolve", actions[0])
        edits = resolved["edit"]["documentChanges"][0]["edits"]
        assert apply_edits(BUG, edits) == devlint_fix_apply(workspace, "head.py", BUG)
    finally:
        assert c.close() == 0


def test_fix_all_command_sends_apply_edit(client, workspace):
    uri = client.open(workspace / "head.py", BUG)
    client.diagnostics(uri, version=1)
    assert client.request("workspace/executeCommand", {"command": "devlint.applyAutofix", "arguments": [uri]}) is None
    edits = [r for r in client.server_requests if r["method"] == "workspace/applyEdit"]
    assert len(edits) == 1
    change = edits[0]["params"]["edit"]["documentChanges"][0]
    assert apply_edits(BUG, change["edits"]) == devlint_fix_apply(workspace, "head.py", BUG)


def test_hover(client, workspace):
    uri = client.open(workspace / "head.py", BUG)
    d = _at(client.diagnostics(uri, version=1), "DL001")
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": d["range"]["start"]})
    assert hover["contents"]["kind"] == "markdown"
    assert hover["contents"]["value"].startswith("**DL001 factory-without-device**")
    assert "## What it does" in hover["contents"]["value"]
    # on a code inside a noqa comment
    text = BUG + "y = 1  # noqa: DL004\n"
    client.change(uri, text, 2)
    client.diagnostics(uri, version=2)
    line = len(text.split("\n")) - 2
    col = text.split("\n")[line].index("DL004") + 2
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col}})
    assert hover["contents"]["value"].startswith("**DL004 ")
    # nowhere near a finding or a code
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}) is None


def test_settings_from_pyproject_and_reload(workspace):
    (workspace / "pyproject.toml").write_text('[tool.devlint]\nper-file-ignores = { "skip_*.py" = ["DL001"] }\n', encoding="utf-8")
    (workspace / "vendor").mkdir()
    c = Client(workspace)
    try:
        c.initialize(workspace)
        skipped = c.open(workspace / "skip_me.py", BUG)
        assert c.diagnostics(skipped, version=1) == []
        checked = c.open(workspace / "head.py", BUG)
        assert [d["code"] for d in c.diagnostics(checked, version=1)] == ["DL001"]
        # the configuration changes on disk: every open document is checked again
        (workspace / "pyproject.toml").write_text('[tool.devlint]\nignore = ["DL001"]\nextend-exclude = ["vendor"]\n', encoding="utf-8")
        c.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (workspace / "pyproject.toml").as_uri(), "type": 2}]})
        assert c.diagnostics(checked, version=1) == []
        assert c.diagnostics(skipped, version=1) == []
        (workspace / "pyproject.toml").write_text('[tool.devlint]\nextend-exclude = ["vendor"]\n', encoding="utf-8")
        c.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (workspace / "pyproject.toml").as_uri(), "type": 2}]})
        assert [d["code"] for d in c.diagnostics(checked, version=1)] == ["DL001"]
        # an excluded file gets no diagnostics
        vendored = c.open(workspace / "vendor" / "lib.py", BUG)
        assert c.diagnostics(vendored, version=1) == []
        # a pyproject.toml open in the editor and saved: read again too
        toml = '[tool.devlint]\nignore = ["DL0"]\n'
        (workspace / "pyproject.toml").write_text(toml, encoding="utf-8")
        c.notify("textDocument/didOpen", {"textDocument": {"uri": (workspace / "pyproject.toml").as_uri(), "languageId": "toml",
                                                           "version": 1, "text": toml}})
        c.notify("textDocument/didSave", {"textDocument": {"uri": (workspace / "pyproject.toml").as_uri()}})
        assert c.diagnostics(checked, version=1) == []
    finally:
        assert c.close() == 0


def test_invalid_pyproject_is_reported_and_defaults_apply(workspace):
    (workspace / "pyproject.toml").write_text('[tool.devlint]\nselect = ["XX9"]\n', encoding="utf-8")
    c = Client(workspace)
    try:
        c.initialize(workspace)
        uri = c.open(workspace / "head.py", BUG)
        shown = c.wait_for("window/showMessage")
        assert shown["type"] == 1 and "unknown rule code 'XX9'" in shown["message"]
        assert [d["code"] for d in c.diagnostics(uri, version=1)] == ["DL001"]
    finally:
        assert c.close() == 0


def test_notebook_cells(client, workspace):
    nb_uri = (workspace / "explore.ipynb").as_uri()
    cells = [
        ("import torch\nimport torch.nn as nn\n%matplotlib inline\n", 2),
        ("Some *markdown*", 1),
        ("class Net(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(3)\n", 2),
        ("def unfinished(:\n", 2),
    ]
    cell_uris = [f"vscode-notebook-cell:{workspace / 'explore.ipynb'}#cell{i}" for i in range(len(cells))]
    client.notify(
        "notebookDocument/didOpen",
        {
            "notebookDocument": {
                "uri": nb_uri,
                "notebookType": "jupyter-notebook",
                "version": 1,
                "cells": [{"kind": kind, "document": u} for (_, kind), u in zip(cells, cell_uris)],
            },
            "cellTextDocuments": [
                {"uri": u, "languageId": "python" if kind == 2 else "markdown", "version": 1, "text": text}
                for (text, kind), u in zip(cells, cell_uris)
            ],
        },
    )
    diags = client.diagnostics(cell_uris[2])
    assert [d["code"] for d in diags] == ["DL001"]
    assert [d["code"] for d in client.diagnostics(cell_uris[3])] == ["DL000"]  # the broken cell, alone
    assert client.diagnostics(cell_uris[0]) == []  # (a markdown cell gets none)
    assert diags[0]["range"]["start"] == {"line": 2, "character": 19}
    # the CLI on the same notebook says cell 3, line 3
    actions = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": cell_uris[2]}, "range": diags[0]["range"], "context": {"diagnostics": diags, "only": ["quickfix"]}},
    )
    fix = next(a for a in actions if a["title"].startswith("DL001:"))
    assert apply_edits(cells[2][0], fix["edit"]["changes"][cell_uris[2]]).endswith("torch.zeros(3, device=x.device)\n")
    noqa = next(a for a in actions if a["title"] == "Disable DL001 for this line")
    assert apply_edits(cells[2][0], noqa["edit"]["changes"][cell_uris[2]]).split("\n")[2].endswith("torch.zeros(3)  # noqa: DL001")
    hover = client.request("textDocument/hover", {"textDocument": {"uri": cell_uris[2]}, "position": diags[0]["range"]["start"]})
    assert hover["contents"]["value"].startswith("**DL001 ")
    actions = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": cell_uris[0]}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
         "context": {"diagnostics": [], "only": ["source.fixAll"]}},
    )
    (fix_all,) = actions
    assert list(fix_all["edit"]["changes"]) == [cell_uris[2]]  # only the cell that changes; magics untouched
    assert apply_edits(cells[2][0], fix_all["edit"]["changes"][cell_uris[2]]) == cells[2][0].replace("torch.zeros(3)", "torch.zeros(3, device=x.device)")
    # a change in the cell: linted again, with its notebook
    client.notify(
        "notebookDocument/didChange",
        {
            "notebookDocument": {"uri": nb_uri, "version": 2},
            "change": {"cells": {"textContent": [{"document": {"uri": cell_uris[2], "version": 2},
                                                   "changes": [{"text": "y = 1\n"}]}]}},
        },
    )
    assert client.diagnostics(cell_uris[2]) == []


def test_project_findings_across_files(workspace):
    """A file whose bug is in a helper of another module (re-exported by a
    package ``__init__``): the editor reports what ``devlint check`` of the
    whole project reports, before any run filled the cache and after."""
    tree = FIXTURES / "projects" / "helper_makes_cpu_tensor" / "tree"
    shutil.copytree(tree, workspace, dirs_exist_ok=True)
    cli = subprocess.run([sys.executable, "-m", "devlint", "check", "--no-cache", "--output-format", "json", "."],
                         cwd=str(workspace), env=_env(), capture_output=True, text=True)
    expected = [(d["code"], d["location"]["line"], d["message"]) for d in json.loads(cli.stdout) if d["filename"].endswith("kernels.py")]
    assert expected, cli.stdout + cli.stderr
    # the server's current folder need not be the project's
    c = Client(workspace / "gpkit")
    try:
        c.initialize(workspace)
        path = workspace / "gpkit" / "kernels.py"
        uri = c.open(path, path.read_text(encoding="utf-8"))
        got = c.diagnostics(uri, version=1)
        assert [(d["code"], d["range"]["start"]["line"] + 1, d["message"]) for d in got] == expected
        assert got[0]["relatedInformation"][0]["location"]["uri"] == (workspace / "gpkit" / "utils" / "grid.py").as_uri()
        # a `devlint check` stores the summaries; the client's watcher reports it: checked again, same findings
        subprocess.run([sys.executable, "-m", "devlint", "check", "."], cwd=str(workspace), env=_env(), capture_output=True)
        (results,) = (workspace / ".devlint_cache").glob("results-*.json")
        c.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": results.as_uri(), "type": 1}]})
        again = c.diagnostics(uri, version=1)
        assert [(d["code"], d["range"]["start"]["line"] + 1, d["message"]) for d in again] == expected
    finally:
        assert c.close() == 0


@pytest.mark.parametrize("case", sorted(p.name for p in (FIXTURES / "projects").iterdir() if (p / "tree").is_dir()))
def test_every_project_fixture_matches_devlint_check(case, tmp_path):
    """For every file of every project fixture, what the server reports for
    it alone (no cache) is what ``devlint check`` of the whole project
    reports for it (the server's checking, called in process)."""
    _needs_pygls()
    from click.testing import CliRunner

    from devlint.cli import main
    from devlint.server import DevlintServer

    shutil.copytree(FIXTURES / "projects" / case / "tree", tmp_path / "p")
    ws = tmp_path / "p"
    cwd = os.getcwd()
    os.chdir(ws)
    try:
        out = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "json", "."]).stdout
    finally:
        os.chdir(cwd)
    expected: Dict[str, list] = {}
    for d in json.loads(out):
        expected.setdefault(os.path.normpath(d["filename"]), []).append((d["code"], d["location"]["line"], d["message"]))
    server = DevlintServer()
    server._folder_for = lambda path: str(ws)  # no client: the workspace folder
    for f in sorted(ws.rglob("*.py")):
        result, _ = server.lint_text(f.as_uri(), f.read_text(encoding="utf-8"))
        got = [(d.code, d.line, d.message) for d in result.diagnostics]
        assert got == expected.get(os.path.normpath(os.path.relpath(f, ws)), []), f


def test_shutdown_and_exit_end_the_process(workspace):
    c = Client(workspace)
    c.initialize(workspace)
    c.open(workspace / "head.py", BUG)
    assert c.close() == 0


def test_exit_does_not_wait_for_a_running_check(workspace):
    c = Client(workspace)
    c.initialize(workspace)
    big = "import torch\nimport torch.nn as nn\n" + "".join(
        f"\n\nclass H{i}(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(4)\n" for i in range(600)
    )
    c.open(workspace / "big.py", big)  # several seconds of checking
    time.sleep(0.5)
    started = time.monotonic()
    assert c.close() == 0
    assert time.monotonic() - started < 3
    assert not any(n["method"] == "textDocument/publishDiagnostics" for n in c.notifications)


def test_missing_pygls_is_one_clear_line(tmp_path):
    fake = tmp_path / "fake"
    (fake / "pygls").mkdir(parents=True)
    (fake / "pygls" / "__init__.py").write_text("raise ImportError('No module named pygls')\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(fake), env["PYTHONPATH"]])
    proc = subprocess.run([sys.executable, "-m", "devlint", "server"], env=env, capture_output=True, text=True, input="")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'devlint[lsp]'" in lines[0]


def test_docs_match_the_server():
    """docs/editors.md names what the server does, and its settings parse."""
    import re

    from devlint.config import tomllib

    _needs_pygls()
    from devlint import server

    text = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    assert "docs/editors.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    for name in (server.FIX_ALL_KIND, server.FIX_ALL_COMMAND, server.FIX_ALL_TITLE, "Disable DLxxx for this line"):
        assert name in text, name
    assert f"{int(server.DEBOUNCE_SECONDS * 1000)} ms" in text
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
    assert [json.loads(b) for lang, b in blocks if lang == "json"]
    helix = [tomllib.loads(b) for lang, b in blocks if lang == "toml"]
    assert helix[0]["language-server"]["devlint"] == {"command": "devlint", "args": ["server"]}
    assert "devlint" in helix[0]["language"][0]["language-servers"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = pyproject["project"]["optional-dependencies"]
    assert extras["lsp"] == ["pygls>=2"] and "pygls>=2" in extras["test"]
