"""The docs say what the code does: ``docs/index.md`` lists every page (users' pages first,
research records after, marked as such), and ``docs/service.md``'s ``PUT /models/{name}`` field
list is the one generated from the hyperparameter table and covers the request schema."""

from __future__ import annotations

import re
from pathlib import Path

from svmstream.app.api.schemas import ModelCreate
from svmstream.solvers._hyperparameters import put_fields_markdown

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_index_lists_every_page_users_first_then_research_records():
    text = (DOCS / "index.md").read_text()
    users, research = text.split("## Research records")
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    linked = set(re.findall(r"\]\(([a-z_]+\.md)\)", text))
    assert pages - linked == set(), pages - linked
    assert "*research record*" in research and "*research record*" not in users
    for page in ("service.md", "defaults.md", "dashboard.md"):
        assert f"]({page})" in users
    for line in research.splitlines():
        if line.startswith("- "):
            assert "*research record*" in line, line


def test_the_put_field_list_is_generated_from_the_table_and_covers_the_schema():
    text = (DOCS / "service.md").read_text()
    block = re.search(r"<!-- put-fields -->\n(.*?)<!-- /put-fields -->", text, flags=re.S)
    assert block is not None
    assert block.group(1) == put_fields_markdown(), (
        "regenerate: python -c 'from svmstream.solvers._hyperparameters import put_fields_markdown; "
        "print(put_fields_markdown())'"
    )
    listed = set(re.findall(r"^- `([^`]+)`", block.group(1), flags=re.M))
    schema = set(ModelCreate.model_json_schema(by_alias=True)["properties"])
    assert schema - listed == {"challengers", "fields"}, schema - listed
    after = text[block.end() :]
    assert "`challengers`" in after.split("###")[0]
    assert "selection" in listed and "### No settings: a selection" in text


def test_defaults_md_is_the_users_page_with_the_research_record_in_an_appendix():
    text = (DOCS / "defaults.md").read_text()
    user, appendix = text.split("# Appendix: research record")
    for heading in ("## What races", "## What it costs", "## One plain model"):
        assert heading in user
    assert "--no-selection" in user and "SelectionClassifier is warming up" in user
