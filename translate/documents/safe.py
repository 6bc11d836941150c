"""Archives and XML read without trusting them: a zip's entries counted and their unpacked size
bounded before anything is unpacked, no entry named outside the archive, no encrypted entry;
XML parsed without a DTD (so no entity of its own, external or expanding), without the network,
within lxml's default size limits. Writing a package again copies every entry it did not change
byte for byte, in its order and with its compression."""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from typing import BinaryIO

from lxml import etree

from translate.documents.errors import DocumentError


@dataclass(frozen=True)
class Limits:
    """What a file may hold at most."""

    max_bytes: int = 50 * 2**20  # the file as given
    max_entries: int = 10_000  # entries of an archive
    max_unpacked: int = 500 * 2**20  # an archive's entries unpacked, together
    max_ratio: int = 200  # unpacked to packed, an entry at a time (an entry under 1 MiB exempt)
    max_texts: int = 200_000  # texts to translate


DEFAULT_LIMITS = Limits()


def check_texts(count: int, name: str, limits: Limits, what: str = "texts") -> None:
    """A DocumentError where a file holds more texts to translate than `limits` allow."""
    if count > limits.max_texts:
        raise DocumentError(f"{name}: {count:,} {what}, more than the {limits.max_texts:,} allowed")


def read_bounded(handle: BinaryIO, name: str, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """What `handle` holds, read no further than a file may hold (`Limits.max_bytes`): a file
    past it is refused before it is read whole."""
    data = handle.read(limits.max_bytes + 1)
    if len(data) > limits.max_bytes:
        raise DocumentError(f"{name}: more than the {limits.max_bytes:,} bytes a file may hold")
    return data


def check_size(data: bytes, name: str, limits: Limits) -> None:
    if len(data) > limits.max_bytes:
        raise DocumentError(
            f"{name}: {len(data):,} bytes, more than the {limits.max_bytes:,} a file may hold"
        )


class Package:
    """A zip package (an office file) opened safely: its entries' names and bytes, and a writer
    that replaces some of them."""

    def __init__(self, data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> None:
        check_size(data, name, limits)
        self.name = name
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as error:
            raise DocumentError(f"{name}: not a readable zip package ({error})") from None
        if len(infos) > limits.max_entries:
            raise DocumentError(
                f"{name}: {len(infos):,} entries, more than the {limits.max_entries:,} allowed"
            )
        unpacked = 0
        for info in infos:
            if info.flag_bits & 0x1:
                raise DocumentError(f"{name}: entry {info.filename} is encrypted")
            if _outside(info.filename):
                raise DocumentError(f"{name}: entry {info.filename!r} names a path outside it")
            unpacked += info.file_size
            if info.file_size > 2**20 and info.file_size > limits.max_ratio * max(
                info.compress_size, 1
            ):
                raise DocumentError(
                    f"{name}: entry {info.filename} unpacks {info.file_size:,} bytes from "
                    f"{info.compress_size:,}: more than {limits.max_ratio}x"
                )
        if unpacked > limits.max_unpacked:
            raise DocumentError(
                f"{name}: unpacks to {unpacked:,} bytes, more than the {limits.max_unpacked:,} "
                "allowed"
            )
        self.infos = infos

    def names(self) -> list[str]:
        return [info.filename for info in self.infos]

    def read(self, entry: str) -> bytes:
        """The entry's bytes, no more than it declared (a lying header is an error)."""
        info = self._zip.getinfo(entry)
        try:
            with self._zip.open(info) as handle:
                data = handle.read(info.file_size + 1)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
            raise DocumentError(f"{self.name}: entry {entry} cannot be read ({error})") from None
        if len(data) != info.file_size:
            raise DocumentError(f"{self.name}: entry {entry} is not the size it declares")
        return data

    def written(self, replaced: dict[str, bytes]) -> bytes:
        """The package with the entries of `replaced` holding their new bytes, every other
        entry copied as it was, in the same order and with the same compression."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as writer:
            for info in self.infos:
                data = replaced.get(info.filename)
                if data is None:
                    data = self.read(info.filename)
                copy = zipfile.ZipInfo(info.filename, info.date_time)
                copy.compress_type = info.compress_type
                copy.external_attr = info.external_attr
                copy.create_system = info.create_system
                copy.comment = info.comment
                copy.extra = info.extra
                writer.writestr(copy, data)
        return out.getvalue()


def _outside(entry: str) -> bool:
    """Whether a zip entry's name would land outside a folder it was unpacked into."""
    parts = entry.replace("\\", "/").split("/")
    return entry.startswith(("/", "\\")) or ":" in parts[0] or ".." in parts


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        load_dtd=False,
        no_network=True,
        huge_tree=False,
        remove_blank_text=False,
        strip_cdata=False,
    )


def parse_xml(data: bytes, name: str) -> etree._ElementTree:
    """The XML document in `data`; a DocumentError for one that is not well-formed or that has a
    DTD (an internal subset, entity declarations: no format translated here needs one)."""
    try:
        tree = etree.parse(io.BytesIO(data), _parser())
    except etree.XMLSyntaxError as error:
        raise DocumentError(f"{name}: not well-formed XML ({_first_line(error)})") from None
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
        raise DocumentError(f"{name}: has a document type declaration (DTD), which is not read")
    return tree


# What may stand before the root: a byte-order mark, whitespace, the XML declaration, processing
# instructions and comments (a DTD is refused by `parse_xml`)
_PROLOG = re.compile(rb"(?:\xef\xbb\xbf)?(?:\s+|<\?.*?\?>|<!--.*?-->)*", re.DOTALL)


def xml_bytes(tree: etree._ElementTree, original: bytes) -> bytes:
    """The document parsed from `original` written again in its encoding: the original's
    declaration, what precedes the root and its trailing whitespace as they were, where it is in
    an ASCII-compatible encoding and nothing follows the root; else with lxml's declaration."""
    encoding = tree.docinfo.encoding or "UTF-8"
    root = tree.getroot()
    prolog = _PROLOG.match(original)
    if original[prolog.end() : prolog.end() + 1] != b"<" or root.getnext() is not None:
        return etree.tostring(tree, xml_declaration=True, encoding=encoding)
    body = etree.tostring(root, encoding=encoding, xml_declaration=False)
    return original[: prolog.end()] + body + original[len(original.rstrip()) :]


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def text_of(data: bytes, name: str) -> tuple[str, bool]:
    """The UTF-8 text of `data` and whether it began with a byte-order mark (taken off)."""
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data[3 if bom else 0 :].decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DocumentError(f"{name} line {line}: not UTF-8 text") from None
    return text, bom
