"""A run belongs to the page that saved it: the page key, the runs a page lists from it, and
explanations refused on a run shown from a link (no browser: the state and the Saved runs view)."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from store_helpers import OWNER, PAGE_KEY, make_record, run_async, sqlite_store

from app.learner import state as learner_state
from app.learner.page import LearnerPage
from app.learner.page_key import key_hash
from app.learner.runs import explanation_target
from app.learner.state import LearnerState
from app.store import PAGE_RUNS, NotOwnerError

OTHER_KEY = "fedcba9876543210" * 2


def test_the_store_keeps_the_sha256_of_a_32_to_128_hex_digit_key():
    assert key_hash(PAGE_KEY) == OWNER == hashlib.sha256(PAGE_KEY.encode()).hexdigest()
    assert key_hash("a" * 128) != key_hash("a" * 32)
    for bad in ("", "a" * 31, "a" * 129, PAGE_KEY.upper(), PAGE_KEY[:-1] + "g", None, 5):
        with pytest.raises(ValueError, match="not a page key: a page key is 32 to 128 lowercase hex digits"):
            key_hash(bad)


@pytest.fixture
def store(tmp_path):
    return sqlite_store(tmp_path / "runs")


def saved_on_a_page(store, key: str, labels: list[str]) -> LearnerState:
    state = LearnerState(store=store, key_hash=key_hash(key), prediction="p")
    for label in labels:
        state.label = label
        assert state.save_run() is not None, state.save_message
    return state


def test_a_reloaded_page_lists_its_runs_from_its_key_without_runs_in_its_address(store):
    before = saved_on_a_page(store, PAGE_KEY, ["first", "second"])
    # Committed while the server died: the page never heard of it, the store has it with its key.
    lost = make_record(minutes=60 * 24 * 365 * 3, label="committed as the server died")
    store.save(lost, key_hash=OWNER)
    saved_on_a_page(store, OTHER_KEY, ["someone else's"])
    reloaded = LearnerState(store=store)  # no ?runs=
    reloaded.take_page_key(PAGE_KEY)
    assert [r.label for r in reloaded.saved] == ["first", "second", "committed as the server died"]
    assert reloaded.owned == [r.id for r in reloaded.saved] and reloaded.prediction == (lost.prediction or "")
    reloaded.attach_explanation([before.saved[0].id, lost.id], "rows sum to 1")
    assert store.get(lost.id).explanation == store.get(before.saved[0].id).explanation == "rows sum to 1"


def test_a_run_shown_from_a_link_is_read_not_changed(store):
    owner = saved_on_a_page(store, PAGE_KEY, ["mine"])
    (run,) = owner.saved
    other = LearnerPage(store=store)
    other.make_below_maps()
    s = other.state
    s.restore_runs([run.id])  # /?runs=<id> in another browser
    s.take_page_key(OTHER_KEY)
    assert [r.id for r in s.saved] == [run.id] and s.owned == []
    assert other.runs.target.object == ("<p>Save explanation writes to run 1, the latest run (no run is ticked; "
                                        "tick runs to choose others); but run 1 was saved by another page: it "
                                        "can be read here, not explained.</p>")
    other.runs.explanation.value = "someone else's words"
    other.runs.attach()
    assert not other.runs.explanation_ok
    assert other.runs.explanation_message == (
        "Explanation not saved: run 1 was saved by another page (this page shows them from a link, to "
        "read). Only the page that saved a run can explain it: open your own page to explain your runs.")
    with pytest.raises(NotOwnerError):
        s.attach_explanation([run.id], "someone else's words")
    assert store.get(run.id) == run and s.saved == [run]
    # Even a page state that believes it owns the run is refused by the store: the key decides.
    s.owned = [run.id]
    with pytest.raises(NotOwnerError):
        s.attach_explanation([run.id], "someone else's words")
    assert store.get(run.id) == run
    # The owner, after a reload, explains it.
    again = LearnerState(store=store)
    again.take_page_key(PAGE_KEY)
    again.attach_explanation([run.id], "mine")
    assert store.get(run.id).explanation == "mine"


def test_a_served_page_saves_only_once_its_key_arrived_and_a_bad_key_is_said(store):
    s = LearnerState(store=store, awaiting_key=True, prediction="p")
    assert s.save_run() is None and store.count() == 0
    assert s.save_message == ("Not saved: this page is still connecting to the server (its key has not "
                              "arrived); press Save run again in a moment")
    s.take_page_key("not a key")
    assert not s.awaiting_key and "This browser sent no usable page key" in s.restore_message
    record = s.save_run()
    assert record is not None and s.owned == [record.id]
    assert store.page_runs(s.key_hash) == [record]  # its own key for its life


@pytest.mark.parametrize("served", [False, True], ids=["save_run_in_thread", "press_save_served"])
def test_save_run_pressed_before_the_key_arrives_saves_once_it_has(store, monkeypatch, served):
    # A served page's Save run pressed in its first moments waits for the key, says "Saving…"
    # meanwhile, takes a second press as this save, and saves with the key once it has come.
    s = LearnerState(store=store, awaiting_key=True, prediction="p")
    scheduled = []
    if served:  # Save run's click on a served page: press_save hands the save to the page's loop
        monkeypatch.setattr(learner_state.store_calls, "served", lambda: True)
        monkeypatch.setattr(learner_state.pn.state, "execute",
                            lambda work: scheduled.append(asyncio.ensure_future(work())))

    async def press():
        if served:
            assert s.press_save()  # a save is in flight
            return scheduled[-1]
        return asyncio.ensure_future(s.save_run_in_thread())

    async def press_twice_then_key():
        save = await press()
        await asyncio.sleep(learner_state.SAVING_SHOWN_AFTER_S + 0.2)
        assert not save.done() and store.count() == 0
        assert s.saving and s.save_pending and s.save_message == "Saving…"
        if served:
            assert s.press_save() and len(scheduled) == 1  # pressed again meanwhile: that save
        else:
            assert await s.save_run_in_thread() is None
        s.take_page_key(PAGE_KEY)  # its runs listed (served: in a task), then awaiting_key is false
        return await save

    record = run_async(press_twice_then_key())
    assert record is not None and store.page_runs(key_hash(PAGE_KEY)) == [record]
    assert s.owned == [record.id] and not (s.saving or s.save_pending)
    assert s.save_ok and s.save_message.startswith("Saved run #1")


def test_save_run_waits_for_the_key_a_bounded_time_then_says_to_press_again(store, monkeypatch):
    monkeypatch.setattr(learner_state, "KEY_WAIT_S", 0.2)
    s = LearnerState(store=store, awaiting_key=True, prediction="p")
    assert run_async(s.save_run_in_thread()) is None and store.count() == 0
    assert not (s.saving or s.save_pending) and not s.save_ok
    assert s.save_message == ("Not saved: this page is still connecting to the server (its key has not "
                              "arrived); press Save run again in a moment")


def test_a_page_lists_its_latest_runs_only(store, monkeypatch):
    monkeypatch.setattr("app.learner.state.PAGE_RUNS", 2)
    saved_on_a_page(store, PAGE_KEY, ["1", "2", "3"])
    reloaded = LearnerState(store=store)
    reloaded.take_page_key(PAGE_KEY)
    assert [r.label for r in reloaded.saved] == ["2", "3"] and PAGE_RUNS == 200


def test_explanation_target_names_runs_another_page_saved():
    runs = [make_record(minutes=m) for m in range(3)]
    assert explanation_target(runs, [0, 2], owned=[runs[0].id]) == (
        "Save explanation writes to runs 1 and 3; but run 3 was saved by another page: it can be read here, "
        "not explained.")
    assert explanation_target(runs, [0], owned=[runs[0].id]) == "Save explanation writes to run 1."
