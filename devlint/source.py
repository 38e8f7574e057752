"""Reading source files faithfully: encoding (PEP 263 cookie), BOM, bytes
kept so that a fix can write back exactly what it did not mean to change."""

from __future__ import annotations

import codecs
import io
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    """A file that cannot be read or decoded; the message is one line."""


@dataclass
class SourceText:
    text: str
    encoding: str
    bom: bool
    raw: bytes

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return (codecs.BOM_UTF8 + data) if self.bom else data


def decode_source(raw: bytes) -> SourceText:
    """Decode Python source bytes the way the interpreter would."""
    bom = raw.startswith(codecs.BOM_UTF8)
    body = raw[len(codecs.BOM_UTF8):] if bom else raw
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise SourceError(f"cannot decode: {exc}") from None
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    try:
        codecs.lookup(encoding)
        text = body.decode(encoding)
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r} in coding cookie") from None
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"not valid {encoding} (byte 0x{body[exc.start]:02x} at offset {exc.start}); "
            "add a PEP 263 coding cookie or re-save the file as UTF-8"
        ) from None
    return SourceText(text=text, encoding=encoding, bom=bom, raw=raw)
