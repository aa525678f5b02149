"""HTML built from learner text: escaped in every view that shows it, and built only through
:mod:`app.shared.html` (a fragment assembled by hand is where an unescaped value slips in)."""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from store_helpers import make_record, sqlite_store

from app.instructor import InstructorState, RunsTableView
from app.instructor.learners import LearnersView
from app.instructor.upload import UploadView
from app.learner.embed import passed_in_html
from app.learner.page import LearnerPage
from app.shared.compare import ComparisonView

APP = Path(__file__).resolve().parents[1] / "app"
HOSTILE = "<script>alert(\"x\")</script> & 'y' <b>bold</b>"


class Parsed(HTMLParser):
    """The tags, attribute values and text a browser would read from a fragment."""

    def __init__(self, fragment: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self.text: list[str] = []
        self.feed(fragment)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [value or "" for _, value in attrs]

    def handle_data(self, data):
        self.text.append(data)


def assert_shown_as_text(fragment: str, times: int = 1) -> None:
    """``HOSTILE`` is in ``fragment`` as text (or a whole attribute's part), never as markup."""
    parsed = Parsed(str(fragment))
    assert "script" not in parsed.tags and "<b>bold" not in str(fragment)
    shown = "".join(parsed.text) + "".join(parsed.attributes)
    assert shown.count(HOSTILE) >= times, fragment


@pytest.fixture
def hostile_store(tmp_path):
    store = sqlite_store(tmp_path / "runs")
    for minutes in (0, 1):
        store.save(make_record("mask_after_softmax", minutes=minutes, learner=HOSTILE, label=HOSTILE,
                               prediction=HOSTILE, explanation=HOSTILE, notes=HOSTILE))
    return store


def test_the_instructor_table_details_and_open_link_show_learner_text_as_text(hostile_store):
    s = InstructorState(store=hostile_store)
    view = RunsTableView(state=s)
    s.selected_ids = [r.id for r in s.page_runs]
    # learner, label, prediction, explanation and notes of both ticked runs
    assert_shown_as_text(view.details.object, times=10)
    for link in view.table.value["open"]:
        assert_shown_as_text(link)  # its aria-label quotes the label


def test_the_learners_table_and_the_comparison_show_learner_text_as_text(hostile_store):
    learners = LearnersView(hostile_store, timezone=lambda: ZoneInfo("UTC"))
    assert_shown_as_text(learners.table.object)
    compare = ComparisonView()
    compare.show([hostile_store.get(r.id) for r in hostile_store.query().runs], names=[HOSTILE, HOSTILE])
    assert_shown_as_text(compare.summary.object, times=2)


def test_the_learner_page_saved_runs_and_the_embed_show_learner_text_as_text(hostile_store, tmp_path):
    page = LearnerPage(store=sqlite_store(tmp_path / "learner"))
    page.state.saved = [hostile_store.get(r.id) for r in hostile_store.query().runs]
    table = page.runs.table.object
    # label, learner and explanation of each run
    assert_shown_as_text(table() if callable(table) else table, times=6)
    assert_shown_as_text(passed_in_html(HOSTILE, HOSTILE), times=2)  # learner and prediction


def test_an_upload_summary_shows_file_names_as_text(tmp_path):
    view = UploadView(state=InstructorState(store=sqlite_store(tmp_path / "runs")))
    record = make_record("correct", learner="Ada", label="home")
    view.dropper.value = {f"{HOSTILE}.json": record.to_json().encode("utf-8")}
    assert_shown_as_text(view.summary.object)


# Building HTML by hand: an f-string, a + or % or str.format with a tag in its literal text and a
# value put in, or a hand html.escape. CSS and JS constants hold no values, so they do not count.
_TAG = re.compile(r"<[A-Za-z/!]")


def _literal(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def hand_built_html(source: str) -> list[tuple[int, str]]:
    """Where ``source`` builds HTML from values without :mod:`app.shared.html`: (line, how)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if _literal(v))
            if _TAG.search(text) and any(isinstance(v, ast.FormattedValue) for v in node.values):
                found.append((node.lineno, "f-string"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            sides = (node.left, node.right)
            if any(_literal(s) and _TAG.search(s.value) for s in sides) and not all(map(_literal, sides)):
                found.append((node.lineno, "+ or %"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr == "escape" and isinstance(f.value, ast.Name) and f.value.id == "html":
                found.append((node.lineno, "html.escape"))
            elif f.attr == "format" and _literal(f.value) and _TAG.search(f.value.value):
                found.append((node.lineno, "str.format"))
    return sorted(found)


def test_the_guard_finds_each_way_of_building_html_by_hand():
    source = ("import html\n"
              "a = f\"<td>{x}</td>\"\n"
              "b = '<td>' + x\n"
              "c = '<td>{}</td>'.format(x)\n"
              "d = html.escape(x)\n"
              "e = '<p>%s</p>' % x\n"
              "ok = f'{n:,} runs' + '.' + ':host { color: red; }'\n"
              "ok2 = '<b>' + '</b>'\n")
    assert hand_built_html(source) == [
        (2, "f-string"), (3, "+ or %"), (4, "str.format"), (5, "html.escape"), (6, "+ or %")]


def test_html_is_built_only_through_the_helper():
    found = [f"{path.relative_to(APP.parent)}:{line}: {how}"
             for path in sorted(APP.rglob("*.py")) if path != APP / "shared" / "html.py"
             for line, how in hand_built_html(path.read_text(encoding="utf-8"))]
    assert found == [], "build these with app.shared.html.html():\n" + "\n".join(found)
