"""The README and docs agree with each other and point at what exists."""

import re

import pytest
from helpers import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"


def headline_scores(text: str) -> list[str]:
    """The bold figures of the first table row that starts with '| beam 5'."""
    row = next(line for line in text.splitlines() if line.startswith("| beam 5"))
    return re.findall(r"\*\*([\d.]+)\*\*", row)


def test_the_readme_headline_scores_are_those_of_the_benchmarks_page():
    readme, benchmarks = (
        headline_scores(README.read_text()),
        headline_scores((DOCS / "benchmarks.md").read_text()),
    )
    assert len(readme) == 2 and readme == benchmarks


def test_the_readme_quotes_the_make_train_output_the_benchmarks_page_reports():
    readme = README.read_text()
    bleu, chrf = headline_scores(readme)
    assert f"BLEU {bleu} " in readme and f"chrF2 {chrf}" in readme


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation but hyphens and
    underscores dropped, spaces made hyphens."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def headings(path) -> list[str]:
    """The anchors of a page's headings."""
    return [anchor(heading) for heading in re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)]


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_links_point_at_files_and_sections_that_exist(page):
    text = page.read_text()
    for target in re.findall(r"\]\(([^)#:]+\.md)(#[^)]*)?\)", text):
        path, section = (page.parent / target[0]).resolve(), target[1].lstrip("#")
        assert path.is_file(), f"{page.name} links to a missing {target[0]}"
        if section:
            assert section in headings(path), (
                f"{page.name} links to a missing section {target[0]}#{section}"
            )
    own = headings(page)
    for section in re.findall(r"\]\(#([^)]+)\)", text):
        assert section in own, f"{page.name} links to a missing section #{section}"


def test_headings_give_the_anchors_github_gives():
    assert anchor("`tie_embeddings: auto`") == "tie_embeddings-auto"
    assert (
        anchor("The headline contrast at `make train`'s budget, tested")
        == "the-headline-contrast-at-make-trains-budget-tested"
    )


def test_every_docs_page_is_linked_from_the_readme():
    readme = README.read_text()
    assert all(f"(docs/{page.name}" in readme for page in DOCS.glob("*.md"))


def test_the_readme_fits_on_a_screen_or_two():
    assert len(README.read_text().splitlines()) <= 120


def test_the_benchmarks_page_holds_current_tables_only():
    assert len((DOCS / "benchmarks.md").read_text().splitlines()) <= 400
