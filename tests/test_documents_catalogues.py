"""Translation catalogues: gettext .po/.pot (translate.documents.gettext) and XLIFF 1.2 and 2.0
(translate.documents.xliff) read into their texts and written again with fake translations:
what is translated, kept, flagged for review, and refused."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from lxml import etree

from translate.decode.pipeline import Translation
from translate.documents import gettext, xliff
from translate.documents.errors import DocumentError
from translate.documents.formats import RenderOptions, Translated, format_of
from translate.documents.safe import Limits
from translate.documents.translating import translate_texts

DATA = Path(__file__).parent / "fixtures" / "documents_catalogues"
DE = RenderOptions(source_lang="en", target_lang="de")
X12 = "{urn:oasis:names:tc:xliff:document:1.2}"
X20 = "{urn:oasis:names:tc:xliff:document:2.0}"


def same(texts: list[str], confidence: float = 1.0) -> list[Translated]:
    """Each text translated as itself."""
    return [Translated(text, confidence) for text in texts]


# what a model that protects spans writes as it was: inline tags, printf placeholders
_KEPT = re.compile(r"<[^>]*>|%(?:\(\w+\))?[-+0 #]*\d*(?:\.\d+)?[a-zA-Z]")


def shout(text: str) -> str:
    """A fake translation: the words upper-cased, tags and placeholders as they were."""
    kept = [match.group() for match in _KEPT.finditer(text)]
    words = [part.upper() for part in _KEPT.split(text)]
    return "".join(word + tag for word, tag in zip(words, [*kept, ""]))


def shouted(texts: list[str], confidence: float = 1.0) -> list[Translated]:
    return [Translated(shout(text), confidence) for text in texts]


def po(text: str, name: str = "messages.po"):
    return gettext.read(text.encode("utf-8"), name)


def rendered(document, translations, options: RenderOptions = DE) -> str:
    return document.render(translations, options).decode("utf-8")


# --- gettext ------------------------------------------------------------------------------
TRANSLATED_PO = (
    '# German translation.\r\nmsgid ""\r\nmsgstr ""\r\n"Language: de_AT\\n"\r\n'
    '"Content-Type: text/plain; charset=UTF-8\\n"\r\n\r\n'
    '#: a.c:1\r\n#, c-format\r\nmsgid "Hello, %s!"\r\nmsgstr   "Hallo, %s!"\r\n\r\n'
    '#~| msgid "Old"\r\n#~ msgid "Older"\r\n#~ msgstr "Älter"\r\n\r\n# a trailing comment'
)


def test_a_catalogue_translated_already_comes_back_byte_for_byte():
    data = b"\xef\xbb\xbf" + TRANSLATED_PO.encode("utf-8")
    document = gettext.read(data, "de.po")
    assert document.texts() == []
    assert document.render([], DE) == data
    assert document.render([], RenderOptions()) == data


def test_a_pot_rendered_as_itself_is_a_po_with_every_comment_and_line_kept():
    template = (DATA / "messages.pot").read_text(encoding="utf-8")
    document = gettext.read(template.encode("utf-8"), "messages.pot")
    assert document.texts() == [
        "Hello, %s!",
        "Open",
        "%d file was removed.",
        "%d files were removed.",
        "The quick brown fox jumps over the lazy dog, and then it runs into the woods where "
        "nobody can see it any more.",
        'First line of the help.\nSecond line, with a "quoted" word and a tab\there.\n',
    ]
    output = rendered(document, same(document.texts()))
    expected = (
        template.replace('"Language: \\n"', '"Language: de\\n"')
        .replace("charset=CHARSET", "charset=UTF-8")
        .replace("nplurals=INTEGER; plural=EXPRESSION;", "nplurals=2; plural=(n != 1);")
        .replace('msgid "Hello, %s!"\nmsgstr ""', 'msgid "Hello, %s!"\nmsgstr "Hello, %s!"')
        .replace('msgid "Open"\nmsgstr ""', 'msgid "Open"\nmsgstr "Open"')
        .replace(
            'msgstr[0] ""\nmsgstr[1] ""',
            'msgstr[0] "%d file was removed."\nmsgstr[1] "%d files were removed."',
        )
        .replace(
            'any more."\nmsgstr ""\n',
            'any more."\nmsgstr ""\n'
            '"The quick brown fox jumps over the lazy dog, and then it runs into the woods "\n'
            '"where nobody can see it any more."\n',
        )
        .replace(
            'tab\\there.\\n"\nmsgstr ""\n',
            'tab\\there.\\n"\nmsgstr ""\n"First line of the help.\\n"\n'
            '"Second line, with a \\"quoted\\" word and a tab\\there.\\n"\n',
        )
    )
    assert output == expected
    assert output != template


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="gettext's tools are not installed")
def test_gettext_accepts_the_output_and_wraps_it_as_written(tmp_path):
    document = gettext.read((DATA / "messages.pot").read_bytes(), "messages.pot")
    path = tmp_path / "de.po"
    path.write_bytes(document.render(shouted(document.texts()), DE))
    subprocess.run(["msgfmt", "--check", "-o", str(tmp_path / "de.mo"), str(path)], check=True)
    rewritten = subprocess.run(["msgcat", str(path)], capture_output=True, check=True).stdout
    assert rewritten == path.read_bytes()


def test_a_fake_translation_changes_only_the_msgstr():
    document = po(
        'msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        "# translator's note\n#. extracted\n#: src/a.py:3\n#, python-format\n"
        'msgctxt "verb"\nmsgid "Save %(name)s"\nmsgstr ""\n\n'
        'msgid "Quit"\nmsgstr "Beenden"\n\n#~| msgid "Exit"\n#~ msgid "Leave"\n#~ msgstr ""\n\n'
        "# the end\n"
    )
    assert document.texts() == ["Save %(name)s"]
    assert rendered(document, shouted(document.texts())) == (
        'msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        "# translator's note\n#. extracted\n#: src/a.py:3\n#, python-format\n"
        'msgctxt "verb"\nmsgid "Save %(name)s"\nmsgstr "SAVE %(name)s"\n\n'
        'msgid "Quit"\nmsgstr "Beenden"\n\n#~| msgid "Exit"\n#~ msgid "Leave"\n#~ msgstr ""\n\n'
        "# the end\n"
    )


HEADER = 'msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'


@pytest.mark.parametrize(
    ("confidence", "flags"),
    [(0.29, "#, fuzzy, c-format\n"), (0.3, "#, c-format\n"), (0.9, "#, c-format\n")],
)
def test_a_translation_under_the_threshold_is_marked_fuzzy(confidence, flags):
    document = po(HEADER + '#, c-format\nmsgid "%d apples"\nmsgstr ""\n')
    output = rendered(document, same(document.texts(), confidence))
    assert output == HEADER + flags + 'msgid "%d apples"\nmsgstr "%d apples"\n'


def test_a_fuzzy_message_is_translated_again_and_loses_its_flag_when_confident():
    source = (
        HEADER
        + '#, fuzzy\n#| msgid "Open a file"\nmsgid "Open the file"\nmsgstr "Eine Datei öffnen"\n\n'
        + '#, fuzzy, c-format\nmsgid "%s left"\nmsgstr "%s übrig (alt)"\n'
    )
    document = po(source)
    assert document.texts() == ["Open the file", "%s left"]
    confident = rendered(
        document, [Translated("Die Datei öffnen", 0.8), Translated("%s übrig", 0.8)]
    )
    assert confident == (
        HEADER
        + '#| msgid "Open a file"\nmsgid "Open the file"\nmsgstr "Die Datei öffnen"\n\n'
        + '#, c-format\nmsgid "%s left"\nmsgstr "%s übrig"\n'
    )
    doubtful = rendered(document, [Translated("Die Datei öffnen", 0.1), Translated("%s", 0.1)])
    assert doubtful == (
        HEADER
        + '#, fuzzy\n#| msgid "Open a file"\nmsgid "Open the file"\nmsgstr "Die Datei öffnen"\n\n'
        + '#, fuzzy, c-format\nmsgid "%s left"\nmsgstr "%s"\n'
    )


def test_translated_header_and_obsolete_entries_are_not_texts():
    document = po(
        HEADER
        + 'msgid "Yes"\nmsgstr "Ja"\n\nmsgid "No"\nmsgstr ""\n\n'
        + '#~ msgid "Maybe"\n#~ msgstr ""\n\nmsgid "   "\nmsgstr ""\n'
    )
    assert document.texts() == ["No"]


def test_plural_forms_follow_the_headers_nplurals():
    document = po(
        'msgid ""\nmsgstr ""\n"Language: ru\\n"\n'
        '"Plural-Forms: nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 '
        '&& (n%100<10 || n%100>=20) ? 1 : 2);\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "%d file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""\n'
    )
    assert document.texts() == ["%d file", "%d files"]
    output = rendered(document, [Translated("%d fail", 1.0), Translated("%d faila", 1.0)])
    assert output.endswith(
        'msgid_plural "%d files"\nmsgstr[0] "%d fail"\nmsgstr[1] "%d faila"\nmsgstr[2] "%d faila"\n'
    )
    assert "nplurals=3" in output and "nplurals=2" not in output


def test_one_plural_form_takes_the_plural_and_filled_forms_are_kept():
    document = po(
        'msgid ""\nmsgstr ""\n"Plural-Forms: nplurals=1; plural=0;\\n"\n'
        '"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "%d file"\nmsgid_plural "%d files"\nmsgstr[0] ""\n'
    )
    output = rendered(document, [Translated("one", 1.0), Translated("many", 1.0)])
    assert output.endswith('msgid_plural "%d files"\nmsgstr[0] "many"\n')
    partial = po(
        HEADER + 'msgid "%d day"\nmsgid_plural "%d days"\nmsgstr[0] "%d Tag"\nmsgstr[1] ""\n'
    )
    assert partial.texts() == ["%d day", "%d days"]
    output = rendered(partial, [Translated("X", 0.1), Translated("%d Tage", 0.9)])
    header = HEADER.replace(
        '"Content-Type: text/plain; charset=UTF-8\\n"\n',
        '"Content-Type: text/plain; charset=UTF-8\\n"\n"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n',
    )
    assert output == (
        header + 'msgid "%d day"\nmsgid_plural "%d days"\nmsgstr[0] "%d Tag"\nmsgstr[1] "%d Tage"\n'
    )


def test_the_language_is_set_where_empty_and_kept_where_named():
    empty = po('msgid ""\nmsgstr ""\n"Language: \\n"\n\nmsgid "Hi"\nmsgstr ""\n')
    assert rendered(empty, same(["Hi"])) == (
        'msgid ""\nmsgstr ""\n"Language: de\\n"\n"MIME-Version: 1.0\\n"\n'
        '"Content-Type: text/plain; charset=UTF-8\\n"\n"Content-Transfer-Encoding: 8bit\\n"\n\n'
        'msgid "Hi"\nmsgstr "Hi"\n'
    )
    named = po(
        'msgid ""\nmsgstr ""\n"Language: de_CH\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "Hi"\nmsgstr ""\n'
    )
    assert '"Language: de_CH\\n"' in rendered(named, same(["Hi"]))
    no_target = rendered(empty, same(["Hi"]), RenderOptions())
    assert '"Language: \\n"' in no_target and "charset=UTF-8" in no_target


def test_a_catalogue_without_a_header_gets_one_after_its_own_comments():
    document = po('# Title of the file\n#\n#: a.c:1\nmsgid "Hi"\nmsgstr ""\n')
    assert rendered(document, same(["Hi"], 0.9)) == (
        '# Title of the file\n#\nmsgid ""\nmsgstr ""\n"Language: de\\n"\n"MIME-Version: 1.0\\n"\n'
        '"Content-Type: text/plain; charset=UTF-8\\n"\n"Content-Transfer-Encoding: 8bit\\n"\n\n'
        '#: a.c:1\nmsgid "Hi"\nmsgstr "Hi"\n'
    )


def test_strings_are_wrapped_as_the_file_wraps_them():
    long = "A message that is long enough that gettext would wrap it over two lines of the file"
    wrapped = po(HEADER + f'msgid ""\n"{long[:72]}"\n"{long[72:]}"\nmsgstr ""\n')
    assert rendered(wrapped, same([long])).endswith(
        'msgstr ""\n"A message that is long enough that gettext would wrap it over two lines of "\n'
        '"the file"\n'
    )
    unwrapped = po(HEADER + f'msgid "{long}"\nmsgstr ""\n')
    assert rendered(unwrapped, same([long])).endswith(f'msgid "{long}"\nmsgstr "{long}"\n')
    rule = "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);"
    long_header = po(
        f'msgid ""\nmsgstr ""\n"Plural-Forms: {rule}\\n"\n\nmsgid ""\n"{long[:72]}"\n"{long[72:]}"\nmsgstr ""\n'
    )
    assert rendered(long_header, same([long])).endswith('wrap it over two lines of "\n"the file"\n')


def test_a_msgstr_of_79_columns_fits_on_its_line_one_of_80_is_wrapped():
    fits = "x" * 67 + " yy"  # msgstr "...": 8 + 70 + 1 = 79 columns
    document = po(HEADER + 'msgid "a"\nmsgstr ""\n\nmsgid "b"\nmsgstr ""\n')
    output = rendered(document, [Translated(fits, 1.0), Translated(fits + "y", 1.0)])
    assert output.endswith(f'msgid "a"\nmsgstr "{fits}"\n\nmsgid "b"\nmsgstr ""\n"{fits}y"\n')


def test_a_message_without_msgstr_at_the_end_of_the_file_gets_one():
    document = po(HEADER + 'msgid "Last"')
    assert rendered(document, same(["Last"])) == HEADER + 'msgid "Last"\nmsgstr "Last"'


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b'msgid "a"\nmsgstr "b "c""\n',
            "messages.po line 2: not a gettext catalogue (unescaped double quote found)",
        ),
        (b'msgid "a"\nbogus\n', "messages.po line 2: not a gettext catalogue (syntax error)"),
        (b'msgid "a"\nmsgstr "\xe4"\n', "messages.po line 2: not UTF-8 text"),
        (
            b'msgid ""\nmsgstr "Content-Type: text/plain; charset=ISO-8859-1\\n"\n',
            "messages.po: declares charset ISO-8859-1; only UTF-8 catalogues are read "
            "(convert it with msgconv --to-code=UTF-8)",
        ),
    ],
)
def test_a_broken_catalogue_is_refused_in_one_line(data, message):
    with pytest.raises(DocumentError) as error:
        gettext.read(data, "messages.po")
    assert str(error.value) == message


def test_a_catalogue_naming_a_file_is_not_read_as_that_file(tmp_path):
    secret = tmp_path / "secret.po"
    secret.write_text('msgid "secret"\nmsgstr ""\n', encoding="utf-8")
    with pytest.raises(DocumentError, match="a file's path"):
        gettext.read(str(secret).encode(), "upload.po")


def test_catalogue_limits():
    data = (HEADER + 'msgid "a"\nmsgstr ""\n\nmsgid "b"\nmsgstr ""\n').encode()
    with pytest.raises(DocumentError, match="2 texts to translate, more than the 1 allowed"):
        gettext.read(data, "big.po", Limits(max_texts=1))
    with pytest.raises(DocumentError, match="more than the 10 a file may hold"):
        gettext.read(data, "big.po", Limits(max_bytes=10))


def test_rendering_needs_one_translation_a_text():
    document = po(HEADER + 'msgid "a"\nmsgstr ""\n')
    with pytest.raises(ValueError, match="1 texts, 0 translations"):
        document.render([], DE)


# --- XLIFF 1.2 ------------------------------------------------------------------------------
def sample(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


TARGET_1 = (
    '<target xml:lang="de" state="translated">Save <g id="g1" ctype="bold">all '
    '<g id="g2" ctype="italic">open</g> files</g> now<x id="x1" ctype="lb"/>or later.</target>'
)
TARGET_7 = (
    '<target xml:lang="de" state="translated" ex:note="old">Print <bpt id="b1">&lt;a href="x"&gt;'
    '</bpt>the page<ept id="b1">&lt;/a&gt;</ept> <ph id="p1">{count}</ph> times.</target>'
)
TARGET_8 = (
    '<target xml:lang="de" state="translated"><mrk mtype="seg" mid="1">First sentence.</mrk> '
    '<mrk mtype="seg" mid="2">Second <it id="i1" pos="open">&lt;b&gt;</it>one.</mrk></target>'
)


def test_xliff_12_texts_skip_what_is_not_to_translate():
    document = xliff.read(sample("sample-1.2.xlf").encode(), "sample.xlf")
    assert document.texts() == [
        "Save <g1>all </g1><g2>open</g2><g3> files</g3> now<x4/>or later.",
        "Print <x1/>the page<x2/> <x3/> times.",
        "First sentence.",
        "Second <x1/>one.",
    ]


def test_xliff_12_rendered_as_itself_adds_only_the_targets():
    source = sample("sample-1.2.xlf")
    document = xliff.read(source.encode(), "sample.xlf")
    output = rendered(document, same(document.texts()))
    expected = (
        source.replace('datatype="html">', 'datatype="html" target-language="de">')
        .replace(
            '</source>\n        <note from="dev">',
            f'</source>\n        {TARGET_1}\n        <note from="dev">',
        )
        .replace(
            '<target xml:lang="de" state="needs-translation" ex:note="old">Drucken</target>',
            TARGET_7,
        )
        .replace("</mrk></seg-source>\n", f"</mrk></seg-source>\n        {TARGET_8}\n")
    )
    assert output == expected
    assert document.render(same(document.texts()), DE) == output.encode()  # render is repeatable


def test_an_xliff_with_nothing_to_translate_comes_back_byte_for_byte():
    data = sample("sample-1.2.xlf").encode()
    document = xliff.read(data, "sample.xlf")
    translated = document.render(same(document.texts()), DE)
    again = xliff.read(translated, "sample.de.xlf")
    assert again.texts() == []
    assert again.render([], DE) == translated


def test_xliff_12_reordered_tags_keep_every_code_and_attribute():
    document = xliff.read(sample("sample-1.2.xlf").encode(), "sample.xlf")
    translations = [
        Translated("<x4/>Später: <g3>alle Dateien</g3> <g2>offen</g2> <g1>speichern</g1>!", 0.9),
        Translated("<x3/> Mal <x1/>die Seite<x2/> drucken.", 0.9),
        Translated("Erster Satz.", 0.9),
        Translated("Zweiter <x1/>Satz.", 0.9),
    ]
    output = rendered(document, translations)
    assert (
        '<target xml:lang="de" state="translated"><x id="x1" ctype="lb"/>Später: '
        '<g id="g1" ctype="bold">alle Dateien</g> <g id="g1" ctype="bold"><g id="g2" '
        'ctype="italic">offen</g></g> <g id="g1" ctype="bold">speichern</g>!</target>'
    ) in output
    assert (
        '<target xml:lang="de" state="translated" ex:note="old"><ph id="p1">{count}</ph> Mal '
        '<bpt id="b1">&lt;a href="x"&gt;</bpt>die Seite<ept id="b1">&lt;/a&gt;</ept> drucken.'
        "</target>"
    ) in output
    assert (
        '<mrk mtype="seg" mid="1">Erster Satz.</mrk> <mrk mtype="seg" mid="2">Zweiter '
        '<it id="i1" pos="open">&lt;b&gt;</it>Satz.</mrk></target>'
    ) in output


def test_xliff_12_upper_cased_words_keep_the_codes_where_they_were():
    document = xliff.read(sample("sample-1.2.xlf").encode(), "sample.xlf")
    output = rendered(document, shouted(document.texts()))
    assert (
        TARGET_1.replace(">Save ", ">SAVE ")
        .replace("all ", "ALL ")
        .replace(">open<", ">OPEN<")
        .replace(" files<", " FILES<")
        .replace(" now<", " NOW<")
        .replace("or later.", "OR LATER.")
        in output
    )


def test_xliff_12_garbled_tags_lose_no_word_and_no_code():
    document = xliff.read(sample("sample-1.2.xlf").encode(), "sample.xlf")
    garbled = [Translated(text.replace("</g1>", ""), 1.0) for text in document.texts()]
    output = rendered(document, garbled)
    assert (
        '<target xml:lang="de" state="translated">Save all open files nowor later.'
        '<x id="x1" ctype="lb"/></target>'
    ) in output


def test_xliff_a_code_stays_inside_the_paired_code_that_held_it_where_that_one_is_open():
    data = (
        b'<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2" version="1.2"><file original="f" '
        b'source-language="en" datatype="plaintext"><body><trans-unit id="1"><source>'
        b'<g id="1">Save all<x id="2"/></g> now</source></trans-unit></body></file></xliff>'
    )
    document = xliff.read(data, "codes.xlf")
    assert document.texts() == ["Save all<x1/><g2> now</g2>"]
    inside = document.render([Translated("Alle sichern<x1/><g2> jetzt</g2>", 1.0)], RenderOptions())
    assert (
        b'<target state="translated"><g id="1">Alle sichern<x id="2"/></g> jetzt</target>' in inside
    )
    moved = document.render([Translated("<g2>Jetzt </g2><x1/>alle sichern", 1.0)], RenderOptions())
    assert (
        b'<target state="translated">Jetzt <x id="2"/><g id="1">alle sichern</g></target>' in moved
    )


@pytest.mark.parametrize(
    ("confidence", "state"), [(0.1, "needs-review-translation"), (0.3, "translated")]
)
def test_xliff_12_state_follows_the_threshold(confidence, state):
    document = xliff.read(sample("sample-1.2.xlf").encode(), "sample.xlf")
    tree = etree.fromstring(document.render(same(document.texts(), confidence), DE))
    states = {
        unit.get("id"): unit.find(f"{X12}target").get("state")
        for unit in tree.iter(f"{X12}trans-unit")
        if unit.find(f"{X12}target") is not None
    }
    assert states == {
        "1": state,
        "4": "final",
        "5": None,
        "6": "needs-review-translation",
        "7": state,
        "8": state,
    }


def test_xliff_12_a_unit_takes_its_least_confident_segment():
    document = xliff.read(sample("sample-1.2.xlf").encode(), "sample.xlf")
    confidences = [0.9, 0.9, 0.9, 0.2]
    translations = [Translated(t, c) for t, c in zip(document.texts(), confidences)]
    tree = etree.fromstring(document.render(translations, DE))
    targets = {unit.get("id"): unit.find(f"{X12}target") for unit in tree.iter(f"{X12}trans-unit")}
    assert targets["8"].get("state") == "needs-review-translation"
    assert targets["1"].get("state") == targets["7"].get("state") == "translated"


def test_xliff_12_new_and_draft_targets_are_translated_others_kept():
    units = (
        '<trans-unit id="a"><source>One</source><target state="new">Eins?</target></trans-unit>'
        '<trans-unit id="b"><source>Two</source><target state="signed-off">Zwei</target></trans-unit>'
        '<trans-unit id="c"><source>Three</source><target state="x-custom">Drei</target></trans-unit>'
        '<trans-unit id="d"><source>Four</source><target/></trans-unit>'
        '<trans-unit id="e"><source>Five</source><target state="translated"></target></trans-unit>'
    )
    data = (
        '<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2" version="1.2"><file original="f" '
        f'source-language="en" target-language="de-AT" datatype="plaintext"><body>{units}</body>'
        "</file></xliff>"
    ).encode()
    document = xliff.read(data, "units.xlf")
    assert document.texts() == ["One", "Four", "Five"]
    output = rendered(document, shouted(document.texts()), RenderOptions(target_lang="fr"))
    assert 'target-language="de-AT"' in output and "fr" not in output
    assert '<target state="translated" xml:lang="de-AT">ONE</target>' in output
    assert '<target xml:lang="de-AT" state="translated">FOUR</target>' in output
    assert '<target state="translated" xml:lang="de-AT">FIVE</target>' in output
    assert '<target state="signed-off">Zwei</target>' in output


def test_xliff_12_comments_and_foreign_elements_in_a_source_are_kept():
    data = (
        '<?xml version="1.0" encoding="ISO-8859-1"?>\n'
        '<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2" xmlns:o="urn:o" version="1.2">'
        '<file original="f" source-language="en" datatype="plaintext"><body>\n'
        '<trans-unit id="1"><source xml:space="preserve">Caf\xe9 <!-- c --><o:var n="1"/> '
        "<?pi x?>open</source></trans-unit>\n</body></file></xliff>\n"
    ).encode("latin-1")
    document = xliff.read(data, "latin.xlf")
    assert document.texts() == ["Café <x1/><x2/> <x3/>open"]
    output = document.render([Translated("Café <x3/><x2/><x1/> offen €", 1.0)], DE)
    assert output.startswith(b'<?xml version="1.0" encoding="ISO-8859-1"?>\n<xliff')
    assert output.endswith(b"</xliff>\n")
    assert (
        b'<target xml:space="preserve" xml:lang="de" state="translated">Caf\xe9 <?pi x?>'
        b'<o:var n="1"/><!-- c --> offen &#8364;</target>'
    ) in output
    assert (
        xliff.read(data, "latin.xlf")
        .render(same(document.texts()), RenderOptions())
        .replace(
            b'<target xml:space="preserve" state="translated">Caf\xe9 <!-- c --><o:var n="1"/> '
            b"<?pi x?>open</target>",
            b"",
        )
        == data
    )


def test_xliff_in_utf_16_is_written_in_utf_16():
    data = (
        '<?xml version="1.0" encoding="UTF-16"?>\n<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2"'
        ' version="1.2"><file original="f" source-language="en" datatype="plaintext"><body>'
        '<trans-unit id="1"><source>Hi</source><target> </target></trans-unit></body></file></xliff>'
    ).encode("utf-16")
    document = xliff.read(data, "wide.xlf")
    assert document.texts() == ["Hi"]
    output = document.render([Translated("Hallo ä", 1.0)], DE)
    assert output.startswith(b"\xff\xfe<\x00?\x00x\x00m\x00l\x00")
    assert (
        '<trans-unit id="1"><source>Hi</source><target xml:lang="de" state="translated">Hallo ä'
        "</target></trans-unit>"
    ) in output.decode("utf-16")


# --- XLIFF 2.0 ------------------------------------------------------------------------------
def test_xliff_20_rendered_as_itself_adds_only_targets_and_states():
    source = sample("sample-2.0.xlf")
    document = xliff.read(source.encode(), "sample.xlf")
    assert document.texts() == ["Press <g1>Save</g1> to keep<x2/> your <g3>work</g3>.", "Cancel"]
    output = rendered(document, same(document.texts()))
    expected = (
        source.replace('srcLang="en">', 'srcLang="en" trgLang="de">')
        .replace('<segment id="s1">', '<segment id="s1" state="translated">')
        .replace(
            'your <mrk id="m1" type="term" ref="#t1">work</mrk>.</source>\n',
            'your <mrk id="m1" type="term" ref="#t1">work</mrk>.</source>\n        <target>Press '
            '<pc id="1" dataRefStart="d1" dataRefEnd="d2">Save</pc> to keep<ph id="2" '
            'dataRef="d3"/> your <mrk id="m1" type="term" ref="#t1">work</mrk>.</target>\n',
        )
        .replace(
            '<segment id="s4" state="initial" subState="example:draft">',
            '<segment id="s4" state="translated">',
        )
        .replace("<target>Abbr.</target>", "<target>Cancel</target>")
    )
    assert output == expected


def test_xliff_20_doubtful_segments_are_initial_with_a_review_substate():
    document = xliff.read(sample("sample-2.0.xlf").encode(), "sample.xlf")
    translations = [
        Translated("<g3>Arbeit</g3> mit <g1>Sichern</g1> behalten<x2/>.", 0.1),
        Translated("Abbrechen", 0.1),
    ]
    output = rendered(document, translations, RenderOptions(review_below=0.5))
    assert '<segment id="s1" state="initial" subState="translate:needs-review">' in output
    assert '<segment id="s4" state="initial" subState="translate:needs-review">' in output
    assert (
        '<target><mrk id="m1" type="term" ref="#t1">Arbeit</mrk> mit <pc id="1" dataRefStart="d1" '
        'dataRefEnd="d2">Sichern</pc> behalten<ph id="2" dataRef="d3"/>.</target>'
    ) in output
    assert 'trgLang="' not in output  # no target language given, none written
    assert '<mtc:match ref="#s4"><source>Cancel</source><target>Abbrechen</target>' in output


def test_xliff_20_protected_marks_and_kept_segments():
    data = (
        b'<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en" '
        b'trgLang="de"><file id="f" translate="no"><unit id="u1"><segment><source>Skip</source>'
        b'</segment></unit><unit id="u2" translate="yes"><segment><source>Call <mrk id="m" '
        b'translate="no">Foo</mrk> <sc id="1"/>now<ec startRef="1"/>.</source></segment>'
        b"</unit></file></xliff>"
    )
    document = xliff.read(data, "units.xlf")
    assert document.texts() == ["Call <x1/> <x2/>now<x3/>."]
    output = rendered(document, shouted(document.texts()), RenderOptions(target_lang="fr"))
    assert 'trgLang="de"' in output
    assert (
        '<segment state="translated"><source>Call <mrk id="m" translate="no">Foo</mrk> '
        '<sc id="1"/>now<ec startRef="1"/>.</source><target>CALL <mrk id="m" translate="no">'
        'Foo</mrk> <sc id="1"/>NOW<ec startRef="1"/>.</target></segment>'
    ) in output


# --- both -----------------------------------------------------------------------------------
def test_the_formats_registry_reads_catalogues():
    assert isinstance(
        format_of("de.PO").read((DATA / "messages.pot").read_bytes(), "de.po"), gettext.Catalogue
    )
    assert format_of("x.pot").name == "po"
    assert isinstance(
        format_of("a.xliff").read(sample("sample-2.0.xlf").encode(), "a.xliff"), xliff.Xliff
    )


def test_sentences_are_translated_together_without_cutting_a_tag_pair():
    document = xliff.read(sample("sample-1.2.xlf").encode(), "sample.xlf")
    seen = []

    def model(lines: list[str]) -> list[Translation]:
        seen.extend(lines)
        return [Translation(shout(line), 0.0, -0.1 * len(line), len(line)) for line in lines]

    translated = translate_texts(document.texts(), model)
    assert seen[:4] == [
        "Save <g1>all </g1><g2>open</g2><g3> files</g3> now<x4/>or later.",
        "Print <x1/>the page<x2/> <x3/> times.",
        "First sentence.",
        "Second <x1/>one.",
    ]
    output = rendered(document, translated)
    assert '<x id="x1" ctype="lb"/>OR LATER.</target>' in output


LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE xliff [<!ENTITY a "aaaaaaaaaa">'
    '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>\n'
    '<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2" version="1.2"><file original="a" '
    'source-language="en" datatype="plaintext"><body><trans-unit id="1"><source>&c;</source>'
    "</trans-unit></body></file></xliff>"
)
EXTERNAL = (
    '<?xml version="1.0"?>\n<!DOCTYPE xliff [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n'
    '<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en"><file id="f">'
    '<unit id="u"><segment><source>&e;</source></segment></unit></file></xliff>'
)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (LAUGHS, "x.xlf: has a document type declaration (DTD), which is not read"),
        (EXTERNAL, "x.xlf: has a document type declaration (DTD), which is not read"),
        (
            sample("sample-1.2.xlf")[:600],
            "x.xlf: not well-formed XML (Premature end of data in tag trans-unit line 10",
        ),
        (
            '<xliff xmlns="urn:oasis:names:tc:xliff:document:1.0" version="1.0"/>',
            "x.xlf: XLIFF 1.0 in namespace urn:oasis:names:tc:xliff:document:1.0; only XLIFF 1.1 "
            "and 1.2 (urn:oasis:names:tc:xliff:document:1.2) and 2.0 "
            "(urn:oasis:names:tc:xliff:document:2.0) are read",
        ),
        ('<xliff version="1.2"><file/></xliff>', "x.xlf: XLIFF 1.2 in namespace (none); only"),
        ("<html><body/></html>", "x.xlf: not XLIFF (its root element is <html>)"),
        (
            '<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2" version="1.2">\n<file><body>\n'
            '<trans-unit id="7"><target>x</target></trans-unit></body></file></xliff>',
            "x.xlf line 3: trans-unit '7' has no <source>",
        ),
        (
            '<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0">\n<file><unit>\n'
            "<segment><target>x</target></segment></unit></file></xliff>",
            "x.xlf line 3: segment has no <source>",
        ),
    ],
)
def test_hostile_and_broken_xliff_is_refused_in_one_line(data, message):
    with pytest.raises(DocumentError) as error:
        xliff.read(data.encode(), "x.xlf")
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value) and "root:" not in str(error.value)


def test_xliff_limits():
    data = sample("sample-1.2.xlf").encode()
    with pytest.raises(DocumentError, match="4 texts to translate, more than the 3 allowed"):
        xliff.read(data, "sample.xlf", Limits(max_texts=3))
    with pytest.raises(DocumentError, match="a file may hold"):
        xliff.read(data, "sample.xlf", Limits(max_bytes=100))


def test_xliff_1_1_as_translate_toolkit_writes_it_is_read_as_1_2():
    data = (
        b'<?xml version="1.0" encoding="UTF-8"?>\n'
        b'<xliff xmlns="urn:oasis:names:tc:xliff:document:1.1" version="1.1">\n'
        b'  <file original="sb.po" source-language="en-US" datatype="plaintext">\n'
        b"    <body>\n"
        b'      <trans-unit xml:space="preserve" id="3"><source>Save <g id="1">all</g></source>\n'
        b"        <target></target>\n"
        b"      </trans-unit>\n"
        b"    </body>\n"
        b"  </file>\n"
        b"</xliff>\n"
    )
    document = xliff.read(data, "sb.xlf")
    assert document.texts() == ["Save <g1>all</g1>"]
    out = document.render([Translated("<g1>Alle</g1> speichern", 0.9)], RenderOptions(None, "de"))
    assert b'xml:lang="de" state="translated"><g id="1">Alle</g> speichern</target>' in out
    assert b'target-language="de"' in out and b"document:1.2" not in out
