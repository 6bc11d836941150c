"""What every document format builds on (translate/documents): inline formatting as tags and
back, sentences never cut inside a tag pair, archives and XML read safely, plain text."""

import io
import zipfile

import pytest

from translate.decode.pipeline import Translation
from translate.documents import plain
from translate.documents.errors import DocumentError
from translate.documents.formats import (
    EXTENSIONS,
    FORMATS,
    NAMES,
    RenderOptions,
    Translated,
    format_named,
    format_of,
)
from translate.documents.inline import Mark, Run, Tagged, merged
from translate.documents.safe import Limits, Package, parse_xml, read_bounded, xml_bytes
from translate.documents.translating import Plan, edges, project, sentences_of, translate_texts
from translate.text.protected import find_spans

ITEMS = [Run("Click ", "plain"), Run("here", "bold"), Run(" to ", "plain"), Mark("image")]
ITEMS += [Run("open", "plain"), Run(" it", "plain"), Run(".", "link")]


def test_runs_of_the_main_formatting_are_bare_and_the_others_tagged():
    tagged = Tagged.write(ITEMS)
    assert tagged.text == "Click <g1>here</g1> to <x2/>open it<g3>.</g3>"
    assert tagged.base == "plain" and tagged.plain() == "Click here to open it."
    # every tag is a protected span, so the search writes each once
    assert [span.text for span in find_spans(tagged.text)] == [
        "<g1>",
        "</g1>",
        "<x2/>",
        "<g3>",
        "</g3>",
    ]
    assert tagged.read(tagged.text) == merged(ITEMS)


def test_a_translation_takes_each_tags_formatting_in_its_own_order():
    tagged = Tagged.write(ITEMS)
    assert tagged.read("<g3>Zum</g3> Öffnen <x2/>klicken Sie <g1>hier</g1>") == [
        Run("Zum", "link"),
        Run(" Öffnen ", "plain"),
        Mark("image"),
        Run("klicken Sie ", "plain"),
        Run("hier", "bold"),
    ]
    # nested tags: the innermost decides; a mark the translation lacks comes after it
    assert tagged.read("A <g1>b <g3>c</g3></g1>") == [
        Run("A ", "plain"),
        Run("b ", "bold"),
        Run("c", "link"),
        Mark("image"),
    ]


@pytest.mark.parametrize(
    "garbled", ["Klicken </g1>hier<g1> <x2/>", "Klicken <g1>hier <x2/>", "<g1>a</g3>b</g1>"]
)
def test_tags_that_do_not_pair_up_give_the_text_and_every_mark(garbled):
    tagged = Tagged.write(ITEMS)
    out = tagged.read(garbled)
    assert [item for item in out if isinstance(item, Mark)] == [Mark("image")]
    text = "".join(item.text for item in out if isinstance(item, Run))
    assert "<" not in text and {item.key for item in out if isinstance(item, Run)} == {"plain"}


def test_a_tag_written_in_the_text_stays_text():
    tagged = Tagged.write([Run("Type <g1> or <x2/> ", "plain"), Run("now", "bold")])
    assert tagged.pair not in "gx" and tagged.single not in "gx"
    assert tagged.text == f"Type <g1> or <x2/> <{tagged.pair}1>now</{tagged.pair}1>"
    assert tagged.read(tagged.text) == [Run("Type <g1> or <x2/> ", "plain"), Run("now", "bold")]


def test_text_without_tags_is_one_run():
    tagged = Tagged.write([Run("Plain ", 1), Run("text.", 1)])
    assert tagged.text == "Plain text." and tagged.read("Klartext.") == [Run("Klartext.", 1)]


def test_a_sentence_is_never_cut_inside_a_tag_pair():
    split = sentences_of("One <g1>two. Three</g1> four. Five six. <x2/>Seven.")
    assert split.pieces == ("One <g1>two. Three</g1> four.", "Five six.", "<x2/>Seven.")
    assert split.join(list(split.pieces)) == "One <g1>two. Three</g1> four. Five six. <x2/>Seven."


def test_texts_are_translated_in_one_call_with_their_sentences_confidence():
    calls = []

    def translate(lines):
        calls.append(lines)
        return [Translation(line.upper(), 0.0, -len(line), len(line)) for line in lines]

    out = translate_texts(["Ab. Cd.", "", "  e  "], translate)
    assert calls == [["Ab.", "Cd.", "e"]]
    assert [t.text for t in out] == ["AB. CD.", "", "  E  "]
    # exp(-(3 + 3) / (3 + 3)), 1 for a text with nothing to translate
    assert out[0].confidence == pytest.approx(0.36787944) and out[1].confidence == 1.0


def test_formats_by_extension_and_name():
    assert format_of("Report.DOCX").name == "docx" and format_of("a.pot").name == "po"
    assert format_named("xliff").extensions == (".xlf", ".xliff")
    assert len(set(EXTENSIONS)) == len(EXTENSIONS) and len(set(NAMES)) == len(FORMATS)
    with pytest.raises(DocumentError, match=r"a\.pdf: no format has the extension '\.pdf'"):
        format_of("a.pdf")
    with pytest.raises(DocumentError, match="--format rtf: not a format"):
        format_named("rtf")


def test_plain_text_keeps_its_line_breaks_and_byte_order_mark():
    data = "\ufeffOne\r\ntwo\n\nthree".encode()
    document = plain.read(data, "a.txt")
    assert document.texts() == ["One", "two", "", "three"]
    same = document.render([Translated(t, 1.0) for t in document.texts()], RenderOptions())
    assert same == data
    with pytest.raises(DocumentError, match=r"^b\.txt line 2: not UTF-8 text$"):
        plain.read(b"ok\n\xff\n", "b.txt")
    with pytest.raises(DocumentError, match=r"^c\.txt: 3 texts, more than the 2 allowed$"):
        plain.read(b"a\nb\nc", "c.txt", Limits(max_texts=2))


def zip_of(entries: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_a_package_is_written_again_with_the_other_entries_as_they_were():
    data = zip_of({"mimetype": b"application/x", "content.xml": b"<a>x</a>", "img.png": b"\x89P"})
    package = Package(data, "a.odt")
    assert package.names() == ["mimetype", "content.xml", "img.png"]
    again = Package(package.written({"content.xml": b"<a>y</a>"}), "b.odt")
    assert [again.read(name) for name in again.names()] == [b"application/x", b"<a>y</a>", b"\x89P"]
    assert [i.compress_type for i in again.infos] == [i.compress_type for i in package.infos]


def test_hostile_packages_are_refused_before_anything_is_unpacked():
    bomb = zip_of({"content.xml": b"<a>" + b" " * (8 * 2**20) + b"</a>"})
    with pytest.raises(DocumentError, match=r"^bomb\.docx: entry content\.xml unpacks 8,388,615"):
        Package(bomb, "bomb.docx")
    many = zip_of({f"{k}.xml": b"" for k in range(30)})
    with pytest.raises(DocumentError, match="30 entries, more than the 20 allowed"):
        Package(many, "many.odt", Limits(max_entries=20))
    with pytest.raises(DocumentError, match="unpacks to 2,000 bytes, more than the 1,000"):
        Package(zip_of({"a": b"x" * 1000, "b": b"y" * 1000}), "big.ods", Limits(max_unpacked=1000))
    with pytest.raises(DocumentError, match=r"entry '\.\./evil\.xml' names a path outside it"):
        Package(zip_of({"../evil.xml": b"<a/>"}), "trav.docx")
    with pytest.raises(DocumentError, match="^cut.docx: not a readable zip package"):
        Package(zip_of({"content.xml": b"<a>x</a>"})[:-30], "cut.docx")
    encrypted = bytearray(zip_of({"content.xml": b"<a/>"}, zipfile.ZIP_STORED))
    encrypted[6] |= 1  # the local header's flag bits
    central = encrypted.rfind(b"PK\x01\x02")
    encrypted[central + 8] |= 1  # the central directory's
    with pytest.raises(DocumentError, match="entry content.xml is encrypted"):
        Package(bytes(encrypted), "locked.docx")
    with pytest.raises(DocumentError, match="more than the 10 a file may hold"):
        Package(zip_of({"a": b"b"}), "a.docx", Limits(max_bytes=10))


@pytest.mark.parametrize(
    "xml",
    [
        b'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "xx"><!ENTITY y "&x;&x;&x;">]><a>&y;</a>',
        b'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><a>&x;</a>',
        b'<!DOCTYPE a SYSTEM "http://example.org/a.dtd"><a/>',
    ],
)
def test_xml_with_a_document_type_is_refused(xml):
    with pytest.raises(DocumentError, match=r"^a\.xlf: .*(DTD|entity)"):
        parse_xml(xml, "a.xlf")


def test_xml_is_written_again_with_its_declaration():
    data = b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?>\n<a b=\"1\">t<!-- c --></a>"
    tree = parse_xml(data, "a.xml")
    assert xml_bytes(tree, data) == data
    # no standalone declared: none written; comments before the root and the last line break kept
    plain = b'<?xml version="1.0" encoding="UTF-8"?>\n<!-- c -->\n<a>t</a>\n'
    tree = parse_xml(plain, "b.xml")
    tree.getroot().text = "u"
    assert xml_bytes(tree, plain) == plain.replace(b">t<", b">u<")
    with pytest.raises(DocumentError, match=r"^a\.xml: not well-formed XML \("):
        parse_xml(b"<a><b></a>", "a.xml")


@pytest.mark.parametrize(
    ("sentence", "parts"),
    [
        ("<x1/>Related Topics", ("<x1/>", "Related Topics", "")),
        ("<g1>All of it.</g1>", ("<g1>", "All of it.", "</g1>")),
        ("<x1/> <g2>Title</g2> <x3/>", ("<x1/> <g2>", "Title", "</g2> <x3/>")),
        ("A <g1>b</g1> c<x2/>", ("", "A <g1>b</g1> c", "<x2/>")),
        ("<g1>a</g1> and <g2>b</g2>", ("", "<g1>a</g1> and <g2>b</g2>", "")),
        ("<x1/>", ("<x1/>", "", "")),
    ],
)
def test_tags_at_a_sentences_edges_are_set_aside(sentence, parts):
    assert edges(sentence) == parts and "".join(parts) == sentence


def test_a_sentence_with_pairs_is_searched_plain_too_and_the_better_kept():
    texts = ["Click <g1>New</g1>. Then <g2>OK</g2>.", "<x1/>Open <g2>it</g2> now<x3/>"]
    plan = Plan.of(texts)
    assert plan.lines == (
        "Click <g1>New</g1>.",
        "Then <g2>OK</g2>.",
        "Open <g2>it</g2> now",
        "Click New.",
        "Then OK.",
        "Open it now",
        "New",
        "OK",
        "it",
    )
    out = plan.translated(
        [
            Translation(*found)
            for found in [
                ("Klicken Sie auf <g1></g1>.", 0.0, -0.4, 4),  # lost the pair's words: plain
                ("Dann <g2>OK</g2>.", 0.0, -0.4, 4),  # kept: more confident than plain
                ("Öffnen <g2>es</g2> jetzt", 0.0, -4.0, 4),  # less confident than plain
                ("Klicken Sie auf Neu.", 0.0, -0.8, 4),
                ("Dann OK.", 0.0, -0.8, 4),
                ("Jetzt öffnen", 0.0, -0.4, 4),
                ("Neu", 0.0, -0.1, 1),  # found in the plain translation: its run comes back
                ("OK", 0.0, -0.1, 1),
                ("es", 0.0, -0.1, 1),  # not found: the run's formatting is lost
            ]
        ]
    )
    assert [(t.text, t.formatting_lost) for t in out] == [
        ("Klicken Sie auf <g1>Neu</g1>. Dann <g2>OK</g2>.", 0),
        ("<x1/>Jetzt öffnen<x3/>", 1),
    ]


@pytest.mark.parametrize("garbled", ["Dann </g1>OK<g1>.", "Dann <g1>OK."])
def test_a_translation_whose_pairs_do_not_pair_up_gives_way_to_the_plain_one(garbled):
    plan = Plan.of(["Then <g1>OK</g1>."])
    found = [Translation(garbled, 0.0, 0.0, 4), Translation("Dann OK.", 0.0, -8.0, 4)]
    found.append(Translation("Okay", 0.0, 0.0, 1))
    assert plan.translated(found)[0].text == "Dann OK."


def test_runs_are_put_back_longest_first_outside_the_tags_and_in_any_case():
    runs = [("g1", "Extras"), ("g2", "Extras – Makros"), ("g3", " neu "), ("g4", "<fehlt>")]
    text, placed = project("Wählen Sie <x5/>Extras – Makros und dann Neu.", runs)
    assert text == "Wählen Sie <x5/><g2>Extras – Makros</g2> und dann <g3>Neu</g3>."
    assert placed == 2


def test_a_file_over_the_size_limit_is_refused_before_it_is_read_whole():
    handle = io.BytesIO(b"x" * 100)
    with pytest.raises(DocumentError, match=r"^big\.html: more than the 10 bytes a file may hold$"):
        read_bounded(handle, "big.html", Limits(max_bytes=10))
    assert handle.tell() == 11  # read one byte past the limit, no further
    assert read_bounded(io.BytesIO(b"x" * 10), "ok.html", Limits(max_bytes=10)) == b"x" * 10
