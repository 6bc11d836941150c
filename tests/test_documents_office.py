"""Office documents (translate.documents.office): docx, pptx, xlsx, odt, odp and ods edited in
place. Real files LibreOffice wrote (tests/fixtures/documents_office, from the .fodt/.fodp/.fods
there) come back byte for byte when each text is its own translation, and with only their text
changed under a fake one; small packages built here test each kind of inline element, the
rebuilding of paragraphs, and hostile and broken packages."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import pytest

from translate.documents import office
from translate.documents.errors import DocumentError
from translate.documents.formats import RenderOptions, format_of
from translate.documents.safe import Limits
from translate.documents.translating import Translated

DATA = Path(__file__).parent / "fixtures" / "documents_office"
W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
W = f'xmlns:w="{W_NS}" xmlns:r="{R_NS}"'
A = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
P = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
ODF = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:xlink="http://www.w3.org/1999/xlink"'
)
DECLARATION = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\r\n'
TYPE = "application/vnd.openxmlformats-officedocument."


# --- building packages ---------------------------------------------------------------------------
def package(entries: dict[str, str | bytes]) -> bytes:
    """A zip of `entries` in order, `mimetype` stored, the others deflated."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in entries.items():
            stored = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
            archive.writestr(zipfile.ZipInfo(name, (2024, 1, 2, 3, 4, 6)), data, stored)
    return out.getvalue()


def ooxml(main: str, main_type: str, parts: dict[str, tuple[str, str]]) -> bytes:
    """An Office Open XML package: `main` of content type `main_type`, and `parts` (entry:
    (content type, XML))."""
    overrides = "".join(
        f'<Override PartName="/{entry}" ContentType="{TYPE}{kind}"/>'
        for entry, (kind, _) in [(main, (main_type, "")), *parts.items()]
    )
    types = (
        f'{DECLARATION}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
        'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
        f"{overrides}</Types>"
    )
    rels = (
        f'{DECLARATION}<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/'
        f'officeDocument/2006/relationships/officeDocument" Target="{main}"/></Relationships>'
    )
    entries = {"[Content_Types].xml": types, "_rels/.rels": rels}
    return package(entries | {entry: xml for entry, (_, xml) in parts.items()})


def docx(body: str, **parts: str) -> bytes:
    """A docx whose document body is `body`; `parts` more parts by kind (header=XML)."""
    document = f"{DECLARATION}<w:document {W}><w:body>{body}</w:body></w:document>"
    more = {
        f"word/{kind}1.xml": (f"wordprocessingml.{kind}+xml", xml) for kind, xml in parts.items()
    }
    main = {"word/document.xml": ("wordprocessingml.document.main+xml", document)}
    return ooxml("word/document.xml", "wordprocessingml.document.main+xml", main | more)


def pptx(shapes: str) -> bytes:
    slide = (
        f"{DECLARATION}<p:sld {A} {P}><p:cSld><p:spTree><p:sp><p:txBody><a:bodyPr/>{shapes}"
        "</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"
    )
    presentation = f"{DECLARATION}<p:presentation {P}/>"
    return ooxml(
        "ppt/presentation.xml",
        "presentationml.presentation.main+xml",
        {
            "ppt/presentation.xml": ("presentationml.presentation.main+xml", presentation),
            "ppt/slides/slide2.xml": ("presentationml.slide+xml", slide),
            "ppt/slides/slide10.xml": ("presentationml.slide+xml", slide.replace("Slide", "Last")),
        },
    )


def xlsx(strings: str, rows: str) -> bytes:
    return ooxml(
        "xl/workbook.xml",
        "spreadsheetml.sheet.main+xml",
        {
            "xl/workbook.xml": (
                "spreadsheetml.sheet.main+xml",
                f'{DECLARATION}<workbook {S}><sheets><sheet name="Sales" sheetId="1"/></sheets>'
                "</workbook>",
            ),
            "xl/sharedStrings.xml": (
                "spreadsheetml.sharedStrings+xml",
                f"{DECLARATION}<sst {S}>{strings}</sst>",
            ),
            "xl/worksheets/sheet1.xml": (
                "spreadsheetml.worksheet+xml",
                f"{DECLARATION}<worksheet {S}><sheetData>{rows}</sheetData></worksheet>",
            ),
        },
    )


def odf(kind: str, body: str, styles: str = "", manifest: str = "") -> bytes:
    """An OpenDocument package of `kind` (text, spreadsheet, presentation) with `body` in its
    office body, `styles` in its master styles."""
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content {ODF} '
        f'office:version="1.3"><office:body><office:{kind}>{body}</office:{kind}></office:body>'
        "</office:document-content>"
    )
    styles_xml = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-styles {ODF}>'
        f"<office:master-styles>{styles}</office:master-styles></office:document-styles>"
    )
    manifest_xml = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<manifest:manifest xmlns:manifest='
        '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">'
        '<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.'
        f'opendocument.{kind}"/><manifest:file-entry manifest:full-path="content.xml" '
        f'manifest:media-type="text/xml">{manifest}</manifest:file-entry></manifest:manifest>'
    )
    return package(
        {
            "mimetype": f"application/vnd.oasis.opendocument.{kind}",
            "content.xml": content,
            "styles.xml": styles_xml,
            "META-INF/manifest.xml": manifest_xml,
        }
    )


# --- reading and rendering -------------------------------------------------------------------
def upper(text: str) -> str:
    """A fake translation: the words upper-cased, the tags as they were."""
    return re.sub(r"(<[^>]+>)|([^<]+)", lambda m: m.group(1) or m.group(2).upper(), text)


def rendered(data: bytes, name: str, translations) -> bytes:
    """`data` rendered with `translations` (a function of each text, or a list)."""
    document = office.read(data, name)
    texts = document.texts()
    found = translations if isinstance(translations, list) else [translations(t) for t in texts]
    return document.render([Translated(t, 1.0) for t in found], RenderOptions())


def entry(data: bytes, name: str) -> str:
    return zipfile.ZipFile(io.BytesIO(data)).read(name).decode("utf-8")


def body_of(data: bytes) -> str:
    """A docx's document body."""
    return entry(data, "word/document.xml").split("<w:body>")[1].split("</w:body>")[0]


def texts(data: bytes, name: str) -> list[str]:
    return office.read(data, name).texts()


def entries(data: bytes) -> list[tuple[str, int, bytes]]:
    archive = zipfile.ZipFile(io.BytesIO(data))
    return [(i.filename, i.compress_type, archive.read(i)) for i in archive.infolist()]


# --- real files ------------------------------------------------------------------------------
REPORT = [
    "A short report",
    "This is <g1>bold text</g1> and <g2>italic words</g2> in one sentence.",
    "Visit <g1>our web site</g1> for more information.",
    "Name:<x1/>Alice<x2/>Second line with two   spaces.",
    "A bookmarked phrase<x1/> ends here.",
    "An image <x1/> sits inside this line.",
    "A comment<x1/> is attached here.",
]
FIXTURES = {
    "report.docx": [
        *REPORT,
        "The paragraph holding the box.",
        "Text inside a box.",  # the text box's DrawingML shape
        "Text inside a box.",  # and its VML fallback
        "Apples",
        "The header of the report, page <x1/>1",  # the page field's result: 1
        "The footnote explains the details.",
        "Please check this.",
    ],
    "report.odt": [
        *REPORT[:3],
        "The footnote explains the details.",
        *REPORT[3:],
        "Please check this.",
        "The paragraph holding the box.",
        "Text inside a box.",
        "Apples",
        "The header of the report, page ",  # the page number field after it
    ],
    "slides.pptx": [
        "Welcome to the meeting",
        "The <g1>results</g1> are good.",
        "See <g1>the report</g1> online.<x2/>Thank you.",
        "Speak slowly here.",
    ],
    "slides.odp": [
        "Welcome to the meeting",
        "The <g1>results</g1> are good.",
        "See <g1>the report</g1> online.<x2/>Thank you.",
        "Speak slowly here.",
    ],
    "sheet.xlsx": ["Fruit", "Amount", "Green apples", "Very <g1>ripe</g1> pears"],
    "sheet.ods": ["Fruit", "Amount", "Green apples", "Very <g1>ripe</g1> pears", "Page "],
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_real_file_translated_as_itself_comes_back_byte_for_byte(name):
    data = (DATA / name).read_bytes()
    assert texts(data, name) == FIXTURES[name]
    assert entries(rendered(data, name, lambda text: text)) == entries(data)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_real_file_translated_changes_only_its_text(name):
    data = (DATA / name).read_bytes()
    out = rendered(data, name, upper)
    assert texts(out, name) == [upper(text) for text in FIXTURES[name]]
    before, after = office.counts(data, name), office.counts(out, name)
    assert after == before and before.texts == len(FIXTURES[name])
    document = office.read(data, name)
    parts = {e.name for e in document.entries}
    changed = [n for (n, _, b), (_, _, a) in zip(entries(data), entries(out)) if b != a]
    assert changed and set(changed) <= parts
    assert [(n, kind) for n, kind, _ in entries(out)] == [(n, kind) for n, kind, _ in entries(data)]


TOKEN = re.compile(r"<([a-z])(\d+)>.*?</\1\2>|<[a-z]\d+/>|[^<]+")


def reversed_tags(text: str) -> str:
    """A fake translation: the text's runs and marks in the reverse order."""
    return "".join(reversed([m.group(0) for m in TOKEN.finditer(text)]))


def plain(text: str) -> str:
    return re.sub(r"</?[a-z]\d+/?>", "", text)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_real_file_with_its_tags_reordered_keeps_every_mark_and_word(name):
    data = (DATA / name).read_bytes()
    out = rendered(data, name, reversed_tags)
    assert [plain(t) for t in texts(out, name)] == [plain(reversed_tags(t)) for t in FIXTURES[name]]
    before, after = office.counts(data, name), office.counts(out, name)
    assert (after.paragraphs, after.texts, after.marks) == (
        before.paragraphs,
        before.texts,
        before.marks,
    )


def test_the_registry_reads_office_files_with_this_module():
    data = (DATA / "report.docx").read_bytes()
    assert format_of("Report.DOCX").read(data, "Report.DOCX").texts() == FIXTURES["report.docx"]


def test_rendering_twice_gives_independent_documents():
    data = (DATA / "report.odt").read_bytes()
    document = office.read(data, "report.odt")
    first = document.render([Translated(upper(t), 1.0) for t in document.texts()], RenderOptions())
    second = document.render([Translated(t, 1.0) for t in document.texts()], RenderOptions())
    assert texts(first, "a.odt") == [upper(t) for t in FIXTURES["report.odt"]]
    assert entries(second) == entries(data)


def test_a_translation_a_text_or_an_error():
    document = office.read((DATA / "sheet.xlsx").read_bytes(), "sheet.xlsx")
    with pytest.raises(ValueError, match="4 texts, 3 translations"):
        document.render([Translated("x", 1.0)] * 3, RenderOptions())


# --- docx ------------------------------------------------------------------------------------
PARAGRAPH = (
    '<w:p><w:pPr><w:jc w:val="left"/></w:pPr><w:bookmarkStart w:id="0" w:name="b"/>'
    '<w:r w:rsidR="1"><w:t xml:space="preserve">Click </w:t></w:r>'
    '<w:proofErr w:type="spellStart"/><w:hyperlink r:id="rId5"><w:r><w:rPr>'
    '<w:rStyle w:val="Link"/></w:rPr><w:t>here</w:t></w:r></w:hyperlink>'
    '<w:proofErr w:type="spellEnd"/><w:r w:rsidR="2"><w:t xml:space="preserve"> to see page </w:t>'
    '</w:r><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGEREF b </w:instrText>'
    '</w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>3</w:t></w:r><w:r>'
    '<w:fldChar w:fldCharType="end"/></w:r><w:ins w:id="7" w:author="A"><w:r>'
    '<w:t xml:space="preserve"> right</w:t></w:r><w:r><w:rPr><w:b/></w:rPr>'
    '<w:t xml:space="preserve"> now</w:t></w:r></w:ins><w:r><w:t>.</w:t></w:r>'
    '<w:bookmarkEnd w:id="0"/></w:p>'
)
PLAIN = '<w:r w:rsidR="1"><w:t xml:space="preserve">{}</w:t></w:r>'
LINK = (
    '<w:hyperlink r:id="rId5"><w:r><w:rPr><w:rStyle w:val="Link"/></w:rPr>'
    '<w:t xml:space="preserve">{}</w:t></w:r></w:hyperlink>'
)
FIELD = (
    '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGEREF b </w:instrText></w:r>'
    '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
)
FIELD_END = '<w:r><w:fldChar w:fldCharType="end"/></w:r>'


def test_a_docx_paragraph_is_one_text_its_runs_tags_and_its_bookmarks_outside():
    # runs of equal formatting (rsids apart) are one; the field's code is one mark
    assert texts(docx(PARAGRAPH), "a.docx") == [
        "Click <g1>here</g1> to see page <x2/>3<x3/><g4> right</g4><g5> now</g5>."
    ]


def test_a_docx_paragraph_is_written_again_from_its_translation():
    translation = (
        "Klicken Sie <g5>jetzt</g5> <g1>hier</g1>, um Seite <x2/>3<x3/> zu sehen<g4> gleich</g4>."
    )
    out = rendered(docx(PARAGRAPH), "a.docx", [translation])
    # the proofing marks are left out; the insertion split in two gets a fresh id for its second
    assert body_of(out) == (
        '<w:p><w:pPr><w:jc w:val="left"/></w:pPr><w:bookmarkStart w:id="0" w:name="b"/>'
        + PLAIN.format("Klicken Sie ")
        + '<w:ins w:id="7" w:author="A"><w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve">'
        "jetzt</w:t></w:r></w:ins>"
        + PLAIN.format(" ")
        + LINK.format("hier")
        + PLAIN.format(", um Seite ")
        + FIELD
        + PLAIN.format("3")
        + FIELD_END
        + PLAIN.format(" zu sehen")
        + '<w:ins w:id="8" w:author="A"><w:r><w:t xml:space="preserve"> gleich</w:t></w:r></w:ins>'
        + PLAIN.format(".")
        + '<w:bookmarkEnd w:id="0"/></w:p>'
    )
    assert entry(out, "word/document.xml").startswith(DECLARATION + "<w:document ")


def test_a_field_keeps_its_order_whatever_the_translation_does_with_its_tags():
    out = rendered(docx(PARAGRAPH), "a.docx", ["Seite <x3/>3<x2/> <g1>hier</g1>."])
    assert body_of(out) == (
        '<w:p><w:pPr><w:jc w:val="left"/></w:pPr><w:bookmarkStart w:id="0" w:name="b"/>'
        + PLAIN.format("Seite ")
        + FIELD
        + PLAIN.format("3")
        + FIELD_END
        + PLAIN.format(" ")
        + LINK.format("hier")
        + PLAIN.format(".")
        + '<w:bookmarkEnd w:id="0"/></w:p>'
    )


def test_a_translation_with_broken_tags_keeps_its_words_and_every_mark():
    out = rendered(docx(PARAGRAPH), "a.docx", ["kaputt <g1>hier<x2/>"])
    assert body_of(out) == (
        '<w:p><w:pPr><w:jc w:val="left"/></w:pPr><w:bookmarkStart w:id="0" w:name="b"/>'
        + PLAIN.format("kaputt hier")
        + FIELD
        + FIELD_END
        + '<w:bookmarkEnd w:id="0"/></w:p>'
    )


def test_marks_inside_a_run_come_back_in_a_run_of_its_formatting():
    body = (
        "<w:p><w:r><w:rPr><w:i/></w:rPr><w:t>Name:</w:t><w:tab/><w:t>Alice</w:t><w:br/>"
        '<w:lastRenderedPageBreak/><w:t>Bob</w:t></w:r><w:r><w:rPr><w:rStyle w:val="FootnoteAnchor"/>'
        '</w:rPr><w:footnoteReference w:id="2"/></w:r></w:p>'
    )
    assert texts(docx(body), "a.docx") == ["Name:<x1/>Alice<x2/>Bob"]
    out = rendered(docx(body), "a.docx", ["Bob<x2/>Alice<x1/>Name:"])
    italic = "<w:r><w:rPr><w:i/></w:rPr>{}</w:r>"
    assert body_of(out) == (
        "<w:p>"
        + italic.format('<w:t xml:space="preserve">Bob</w:t>')
        + italic.format("<w:br/>")
        + italic.format('<w:t xml:space="preserve">Alice</w:t>')
        + italic.format("<w:tab/>")
        + italic.format('<w:t xml:space="preserve">Name:</w:t>')
        + '<w:r><w:rPr><w:rStyle w:val="FootnoteAnchor"/></w:rPr><w:footnoteReference w:id="2"/>'
        "</w:r></w:p>"
    )


def test_a_text_box_is_a_mark_of_its_paragraph_and_its_paragraphs_texts_of_their_own():
    box = (
        "<w:r><w:drawing><w:txbxContent><w:p><w:r><w:t>Inside the box.</w:t></w:r></w:p>"
        "</w:txbxContent></w:drawing></w:r>"
    )
    body = f'<w:p><w:r><w:t xml:space="preserve">Before </w:t></w:r>{box}<w:r><w:t> after.</w:t></w:r></w:p>'
    assert texts(docx(body), "a.docx") == ["Before <x1/> after.", "Inside the box."]
    out = rendered(docx(body), "a.docx", upper)
    assert body_of(out) == (
        '<w:p><w:r><w:t xml:space="preserve">BEFORE </w:t></w:r><w:r><w:drawing><w:txbxContent>'
        '<w:p><w:r><w:t xml:space="preserve">INSIDE THE BOX.</w:t></w:r></w:p></w:txbxContent>'
        '</w:drawing></w:r><w:r><w:t xml:space="preserve"> AFTER.</w:t></w:r></w:p>'
    )


def test_a_content_control_and_a_smart_tag_are_wrappers_written_again():
    body = (
        '<w:p><w:r><w:t xml:space="preserve">Dear valued </w:t></w:r><w:sdt><w:sdtPr><w:id w:val="5"/>'
        "</w:sdtPr><w:sdtContent><w:r><w:t>customer</w:t></w:r></w:sdtContent></w:sdt>"
        '<w:smartTag w:element="place"><w:r><w:t xml:space="preserve"> in Paris</w:t></w:r>'
        "</w:smartTag><w:r><w:t>,</w:t></w:r></w:p>"
    )
    assert texts(docx(body), "a.docx") == ["Dear valued <g1>customer</g1><g2> in Paris</g2>,"]
    out = rendered(docx(body), "a.docx", ["<g1>Kunde</g1>, <g1>Kundin</g1><g2> in Paris</g2>"])
    assert body_of(out) == (  # a tag written twice: the text is read as plain text
        '<w:p><w:r><w:t xml:space="preserve">Kunde, Kundin in Paris</w:t></w:r></w:p>'
    )
    out = rendered(docx(body), "a.docx", ["<g2>In Paris</g2> liebe <g1>Kunden</g1>"])
    assert body_of(out) == (
        '<w:p><w:smartTag w:element="place"><w:r><w:t xml:space="preserve">In Paris</w:t></w:r>'
        '</w:smartTag><w:r><w:t xml:space="preserve"> liebe </w:t></w:r><w:sdt><w:sdtPr>'
        '<w:id w:val="5"/></w:sdtPr><w:sdtContent><w:r><w:t xml:space="preserve">Kunden</w:t>'
        "</w:r></w:sdtContent></w:sdt></w:p>"
    )


def test_a_content_control_a_translation_splits_gets_a_fresh_id_for_its_second_part():
    control = (
        '<w:sdt><w:sdtPr><w:id w:val="5"/></w:sdtPr><w:sdtContent><w:r><w:t>Ann</w:t></w:r>'
        '<w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve"> Smith</w:t></w:r></w:sdtContent>'
        "</w:sdt>"
    )
    body = f'<w:p><w:r><w:t xml:space="preserve">Signed by </w:t></w:r>{control}</w:p>'
    assert texts(docx(body), "a.docx") == ["Signed by <g1>Ann</g1><g2> Smith</g2>"]
    out = rendered(docx(body), "a.docx", ["<g2>Smith</g2>, unterschrieben von <g1>Ann</g1>"])
    bold = '<w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve">Smith</w:t></w:r>'
    plain = '<w:r><w:t xml:space="preserve">Ann</w:t></w:r>'
    assert body_of(out) == (
        f'<w:p><w:sdt><w:sdtPr><w:id w:val="5"/></w:sdtPr><w:sdtContent>{bold}</w:sdtContent>'
        '</w:sdt><w:r><w:t xml:space="preserve">, unterschrieben von </w:t></w:r><w:sdt><w:sdtPr>'
        f'<w:id w:val="6"/></w:sdtPr><w:sdtContent>{plain}</w:sdtContent></w:sdt></w:p>'
    )


def test_headers_footers_notes_and_comments_are_read_and_other_parts_kept():
    header = f"{DECLARATION}<w:hdr {W}><w:p><w:r><w:t>The header</w:t></w:r></w:p></w:hdr>"
    footer = f"{DECLARATION}<w:ftr {W}><w:p><w:r><w:t>42</w:t></w:r></w:p></w:ftr>"
    comments = (
        f'{DECLARATION}<w:comments {W}><w:comment w:id="0"><w:p><w:r><w:t>Check it</w:t></w:r>'
        "</w:p></w:comment></w:comments>"
    )
    styles = f'{DECLARATION}<w:styles {W}><w:style w:styleId="A"><w:name w:val="Title text"/></w:style></w:styles>'
    data = docx(
        "<w:p><w:r><w:t>Body</w:t></w:r></w:p>",
        header=header,
        footer=footer,
        comments=comments,
        styles=styles,
    )
    assert texts(data, "a.docx") == ["Body", "The header", "Check it"]  # "42" holds no letter
    out = rendered(data, "a.docx", ["Body", "DIE KOPFZEILE", "Check it"])
    changed = [n for (n, _, b), (_, _, a) in zip(entries(data), entries(out)) if a != b]
    assert changed == ["word/header1.xml"]
    assert entry(out, "word/header1.xml") == (
        f'{DECLARATION}<w:hdr {W}><w:p><w:r><w:t xml:space="preserve">DIE KOPFZEILE</w:t></w:r>'
        "</w:p></w:hdr>"
    )


def test_a_strict_open_xml_docx_is_read_in_its_namespace():
    strict = "http://purl.oclc.org/ooxml/wordprocessingml/main"
    data = docx(
        "<w:p><w:r><w:t>Strict text</w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>!</w:t></w:r></w:p>"
    )
    data = package({n: b.replace(W_NS.encode(), strict.encode()) for n, _, b in entries(data)})
    assert texts(data, "a.docx") == ["Strict text<g1>!</g1>"]
    assert '<w:t xml:space="preserve">STRICT TEXT</w:t>' in body_of(rendered(data, "a.docx", upper))


# --- pptx ------------------------------------------------------------------------------------
def test_a_pptx_paragraph_keeps_its_properties_breaks_and_fields():
    shapes = (
        '<a:p><a:pPr algn="ctr"/><a:r><a:rPr lang="en-US" dirty="0"/><a:t>Slide </a:t></a:r>'
        '<a:r><a:rPr lang="en-US" err="1"/><a:t>nummber</a:t></a:r><a:br><a:rPr lang="en-US"/></a:br>'
        '<a:r><a:rPr lang="en-US" b="1"/><a:t>bold</a:t></a:r><a:fld id="{1}" type="slidenum">'
        '<a:rPr lang="en-US"/><a:t>3</a:t></a:fld><a:endParaRPr lang="en-US"/></a:p>'
        '<a:p><a:endParaRPr lang="en-US"/></a:p>'
    )
    data = pptx(shapes)
    # slides in their order (2 before 10); spelling flags tell no runs apart
    assert texts(data, "a.pptx") == [
        "Slide nummber<x1/><g2>bold</g2>",
        "Last nummber<x1/><g2>bold</g2>",
    ]
    out = rendered(data, "a.pptx", ["<g2>Fett</g2> Folie<x1/>Nummer", "Last"])
    slide = entry(out, "ppt/slides/slide2.xml").split("<a:bodyPr/>")[1].split("</p:txBody>")[0]
    assert slide == (
        '<a:p><a:pPr algn="ctr"/><a:r><a:rPr lang="en-US" b="1"/><a:t>Fett</a:t></a:r><a:r>'
        '<a:rPr lang="en-US" dirty="0"/><a:t> Folie</a:t></a:r><a:br><a:rPr lang="en-US"/></a:br>'
        '<a:r><a:rPr lang="en-US" dirty="0"/><a:t>Nummer</a:t></a:r><a:fld id="{1}" type="slidenum">'
        '<a:rPr lang="en-US"/><a:t>3</a:t></a:fld><a:endParaRPr lang="en-US"/></a:p>'
        '<a:p><a:endParaRPr lang="en-US"/></a:p>'
    )
    assert "<a:t>Last</a:t></a:r><a:br>" in entry(out, "ppt/slides/slide10.xml")


# --- xlsx ------------------------------------------------------------------------------------
STRINGS = (
    '<si><t xml:space="preserve">Total sales</t></si><si><t>2024</t></si>'
    '<si><r><t xml:space="preserve">Very </t></r><r><rPr><b/></rPr><t>ripe</t></r><r>'
    '<t xml:space="preserve"> pears</t></r><rPh sb="0" eb="4"><t>ベリー</t></rPh></si>'
)
ROWS = (
    '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1"><v>42</v></c>'
    '<c r="C1" t="str"><f>"Sum"</f><v>Sum</v></c><c r="D1" t="inlineStr"><is><t>Inline words</t>'
    "</is></c></row>"
)


def test_xlsx_strings_are_translated_and_numbers_and_formulas_are_not():
    data = xlsx(STRINGS, ROWS)
    assert texts(data, "a.xlsx") == ["Total sales", "Very <g1>ripe</g1> pears", "Inline words"]
    out = rendered(data, "a.xlsx", ["Umsatz gesamt", "Sehr <g1>reife</g1> Birnen", "Worte"])
    assert entry(out, "xl/sharedStrings.xml") == (
        f'{DECLARATION}<sst {S}><si><t xml:space="preserve">Umsatz gesamt</t></si><si><t>2024</t>'
        '</si><si><r><t xml:space="preserve">Sehr </t></r><r><rPr><b/></rPr><t xml:space="preserve">'
        'reife</t></r><r><t xml:space="preserve"> Birnen</t></r><rPh sb="0" eb="4"><t>ベリー</t>'
        "</rPh></si></sst>"
    )
    assert entry(out, "xl/worksheets/sheet1.xml") == (
        f"{DECLARATION}<worksheet {S}><sheetData>"
        + ROWS.replace("<t>Inline words</t>", '<t xml:space="preserve">Worte</t>')
        + "</sheetData></worksheet>"
    )
    assert entry(out, "xl/workbook.xml") == entry(data, "xl/workbook.xml")  # sheet names kept


def test_a_worksheet_without_inline_strings_is_not_read():
    data = xlsx(STRINGS, '<row r="1"><c r="A1" t="s"><v>0</v></c></row>')
    document = office.read(data, "a.xlsx")
    assert document.texts() == ["Total sales", "Very <g1>ripe</g1> pears"]
    assert office.counts(data, "a.xlsx") == office.Counts(paragraphs=3, texts=2, runs=5, marks=0)


# --- OpenDocument ----------------------------------------------------------------------------
ODT_BODY = (
    '<text:h text:outline-level="1">A  title </text:h>'
    '<text:p text:style-name="P1"><text:soft-page-break/>See <text:a xlink:href="https://x.org/">'
    '<text:span text:style-name="T1">the</text:span> site</text:a>, twice<text:s text:c="2"/>'
    'spaced.<text:note text:id="n1"><text:note-citation>1</text:note-citation><text:note-body>'
    "<text:p>A note.</text:p></text:note-body></text:note><text:tab/>End</text:p>"
    "<text:tracked-changes><text:changed-region><text:deletion><text:p>Deleted words"
    "</text:p></text:deletion></text:changed-region></text:tracked-changes>"
    "<text:p>   </text:p>"
)


def test_an_odt_paragraph_reads_its_spans_links_spaces_and_notes():
    data = odf("text", ODT_BODY)
    assert texts(data, "a.odt") == [
        "A title ",
        "See <g1>the</g1><g2> site</g2>, twice  spaced.<x3/>End",
        "A note.",
    ]


def test_an_odt_paragraph_is_written_again_with_its_spaces_as_odf_keeps_them():
    translation = "  Siehe <g2>die Seite</g2>  und <g1>das</g1>,<x3/>Ende "
    out = rendered(odf("text", ODT_BODY), "a.odt", ["Ein Titel", translation, "Eine Notiz."])
    content = entry(out, "content.xml").split("<office:text>")[1].split("<text:tracked")[0]
    assert content == (
        '<text:h text:outline-level="1">Ein Titel</text:h><text:p text:style-name="P1"><text:s '
        'text:c="2"/>Siehe <text:a xlink:href="https://x.org/">die Seite</text:a> <text:s/>und '
        '<text:a xlink:href="https://x.org/"><text:span text:style-name="T1">das</text:span>'
        '</text:a>,<text:note text:id="n1"><text:note-citation>1</text:note-citation>'
        "<text:note-body><text:p>Eine Notiz.</text:p></text:note-body></text:note><text:tab/>"
        "Ende </text:p>"
    )
    assert "<text:p>Deleted words</text:p>" in entry(out, "content.xml")


def test_odf_headers_and_footers_are_read_from_styles_and_nothing_else_there():
    styles = (
        '<style:master-page style:name="Standard"><style:header><text:p>The header '
        "<text:page-number>1</text:page-number></text:p></style:header><style:footer>"
        "<text:p>The footer</text:p></style:footer></style:master-page>"
        '<style:master-page style:name="Other"><draw:frame><draw:text-box><text:p>Master text'
        "</text:p></draw:text-box></draw:frame></style:master-page>"
    )
    data = odf("text", "<text:p>Body</text:p>", styles)
    assert texts(data, "a.odt") == ["Body", "The header ", "The footer"]
    out = rendered(data, "a.odt", ["Body", "Die Kopfzeile ", "Die Fußzeile"])
    assert entry(out, "content.xml") == entry(data, "content.xml")
    assert (
        "<style:header><text:p>Die Kopfzeile <text:page-number>1</text:page-number></text:p>"
        in entry(out, "styles.xml")
    )
    assert [n for n, kind, _ in entries(out)][0] == "mimetype"
    assert entries(out)[0][1] == zipfile.ZIP_STORED


def test_ods_string_cells_are_translated_and_numbers_dates_and_formulas_are_not():
    cells = (
        '<table:table table:name="Sheet"><table:table-row>'
        '<table:table-cell office:value-type="string"><text:p>Green apples</text:p></table:table-cell>'
        '<table:table-cell office:value-type="float" office:value="3"><text:p>3 apples</text:p>'
        "<office:annotation><text:p>A counted note</text:p></office:annotation></table:table-cell>"
        '<table:table-cell office:value-type="date" office:date-value="2024-01-02">'
        "<text:p>January 2</text:p></table:table-cell>"
        '<table:table-cell table:formula="of:=&quot;Sum&quot;" office:value-type="string">'
        "<text:p>Sum</text:p></table:table-cell></table:table-row></table:table>"
    )
    data = odf("spreadsheet", cells)
    assert texts(data, "a.ods") == ["Green apples", "A counted note"]


def test_an_odp_reads_its_frames_and_notes():
    page = (
        '<draw:page draw:name="p1"><draw:frame><draw:text-box><text:p>Slide text</text:p>'
        "</draw:text-box></draw:frame><presentation:notes xmlns:presentation="
        '"urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"><draw:frame><draw:text-box>'
        "<text:p>Notes text</text:p></draw:text-box></draw:frame></presentation:notes></draw:page>"
    )
    assert texts(odf("presentation", page), "a.odp") == ["Slide text", "Notes text"]


def test_characters_xml_cannot_hold_are_left_out_of_a_translation():
    out = rendered(odf("text", "<text:p>Body</text:p>"), "a.odt", ["Kör\x00per\x1b"])
    assert "<text:p>Körper</text:p>" in entry(out, "content.xml")


# --- errors ----------------------------------------------------------------------------------
def replaced(data: bytes, name: str, new: str | bytes | None) -> bytes:
    """`data` with its entry `name` holding `new` (None: without it)."""
    kept = {n: b for n, _, b in entries(data) if n != name}
    return package(kept if new is None else kept | {name: new})


BROKEN = [
    (
        "a.docx",
        package({"../evil.xml": "<x/>", "[Content_Types].xml": "<x/>"}),
        "a.docx: entry '../evil.xml' names a path outside it",
    ),
    (
        "a.docx",
        b"plain text, not a zip",
        "a.docx: not a readable zip package (File is not a zip file)",
    ),
    (
        "a.docx",
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600),
        "a.docx: an encrypted or legacy binary Office file (an OLE compound file, not a zip "
        "package); save it unencrypted in an Office Open XML or OpenDocument format",
    ),
    ("a.docx", docx("<w:p/>")[:-30], "a.docx: not a readable zip package"),
    (
        "a.docx",
        replaced(
            docx("<w:p/>"),
            "word/document.xml",
            f'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY e "x">]><w:document {W}/>',
        ),
        "a.docx, part word/document.xml: has a document type declaration (DTD), which is not read",
    ),
    (
        "a.docx",
        replaced(docx("<w:p/>"), "word/document.xml", "<w:document><w:body>"),
        "a.docx, part word/document.xml: not well-formed XML",
    ),
    (
        "a.docx",
        replaced(docx("<w:p/>"), "word/document.xml", None),
        "a.docx: the main part word/document.xml is missing",
    ),
    (
        "a.docx",
        replaced(docx("<w:p/>"), "_rels/.rels", None),
        "a.docx: no main part (the package has no _rels/.rels)",
    ),
    (
        "a.pptx",
        docx("<w:p/>"),
        "a.pptx: is an Office Open XML text document (docx), not pptx",
    ),
    ("a.docx", odf("text", ""), "a.docx: is an OpenDocument text (odt), not docx"),
    ("a.ods", odf("presentation", ""), "a.ods: is an OpenDocument presentation (odp), not ods"),
    (
        "a.odt",
        package({"content.xml": "<x/>"}),
        "a.odt: not an Office Open XML or OpenDocument package (it has neither "
        "[Content_Types].xml nor mimetype)",
    ),
    (
        "a.odt",
        replaced(odf("text", ""), "mimetype", "application/vnd.oasis.opendocument.graphics"),
        "a.odt: an OpenDocument package of type 'application/vnd.oasis.opendocument.graphics', "
        "not a text, presentation or spreadsheet",
    ),
    (
        "a.odt",
        odf("text", "", manifest="<manifest:encryption-data/>"),
        "a.odt: encrypted (a password-protected OpenDocument file)",
    ),
    (
        "a.odt",
        replaced(odf("text", ""), "content.xml", None),
        "a.odt: the main part content.xml is missing",
    ),
    (
        "a.odt",
        odf("text", '<text:p>Wide<text:s text:c="99999999"/>gap</text:p>'),
        "a.odt, part content.xml line 2: text:s has text:c='99999999', not a count of spaces "
        "(1 to 10000)",
    ),
    (
        "a.xlsx",
        replaced(xlsx("", ""), "xl/workbook.xml", None),
        "a.xlsx: the main part xl/workbook.xml is missing",
    ),
]


@pytest.mark.parametrize(("name", "data", "message"), BROKEN)
def test_a_broken_or_hostile_package_is_one_clear_error(name, data, message):
    with pytest.raises(DocumentError) as error:
        office.read(data, name)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_a_main_part_of_another_type_is_named():
    data = docx("<w:p/>")
    types = entry(data, "[Content_Types].xml").replace("wordprocessingml.document.main", "drawing")
    with pytest.raises(
        DocumentError,
        match=r"^a\.docx: its main part word/document\.xml is "
        r"application/vnd\.openxmlformats-officedocument\.drawing\+xml, not a text",
    ):
        office.read(replaced(data, "[Content_Types].xml", types), "a.docx")


def test_a_zip_bomb_and_too_many_texts_are_refused():
    bomb = package(
        {
            "mimetype": "application/vnd.oasis.opendocument.text",
            "content.xml": "<a>" + " " * 3_000_000 + "</a>",
        }
    )
    with pytest.raises(DocumentError, match=r"^a\.odt: entry content\.xml unpacks 3,000,007 bytes"):
        office.read(bomb, "a.odt")
    many = odf("text", "<text:p>word</text:p>" * 4)
    with pytest.raises(DocumentError, match=r"^a\.odt: 4 texts, more than the 3 allowed$"):
        office.read(many, "a.odt", Limits(max_texts=3))


def test_a_name_without_an_office_extension_is_read_as_the_package_says():
    assert office.read(odf("text", "<text:p>Body</text:p>"), "upload.bin").kind == "odt"


def test_an_empty_translation_leaves_a_string_its_text_element():
    out = rendered(xlsx(STRINGS, ""), "a.xlsx", ["", "Sehr <g1>reife</g1> Birnen"])
    assert entry(out, "xl/sharedStrings.xml").startswith(
        f'{DECLARATION}<sst {S}><si><t xml:space="preserve"></t></si><si><t>2024</t></si>'
    )
