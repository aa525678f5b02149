"""The instructor's learners view: the Self-attention lesson's checkpoints counted per learner, from
their runs."""

from __future__ import annotations

import csv
import dataclasses
import io
import random
import sys
from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

import pytest
from store_helpers import OWNER, T0, sqlite_store

from app.instructor.learners import (
    COLUMNS,
    LearnersView,
    class_checkpoints,
    learner_checkpoints,
    learners_csv,
    table_rows,
)
from app.store import RunFilter, RunStore, RunSummary
from app.store.dialects import WHITESPACE
from attention_core import FAILURE_MODES, scaled_dot_product_attention
from attention_core.records import ExperimentRecord


def run(learner: str | None, mode: str = "correct", *, causal: bool = True, T: int = 3, minutes: int = 0,
        **text) -> ExperimentRecord:
    result = scaled_dot_product_attention([1.0] * T, [1.0, 2.0, 9.0][:T], causal=causal, failure_mode=mode)
    return ExperimentRecord.from_result(result, created_at=T0 + timedelta(minutes=minutes), learner=learner, **text)


def by_owner(record: ExperimentRecord) -> RunSummary:
    """``record`` as the store sums it up when the page that saved it wrote its explanation."""
    return dataclasses.replace(RunSummary.of(record), explained_by_owner=bool((record.explanation or "").strip()))


def at(minutes: int):
    return T0 + timedelta(minutes=minutes)


def one(runs, class_list=()):
    learners, unnamed = learner_checkpoints(runs, class_list)
    assert len(learners) == 1
    return learners[0], unnamed


def test_a_learner_on_the_class_list_with_no_run_is_missing_everything():
    learner, unnamed = one([], ["  Ada "])
    assert (learner.learner, learner.runs, unnamed) == ("Ada", 0, 0)
    assert all(learner.reached(c) is None for c in ("predict", "experiment", "explain"))
    row = table_rows([learner], UTC)[0]
    assert row["predict"] == "missing" and row["explain"] == "missing"
    assert row["experiment"] == "missing a correct causal run and a mask-after-softmax run"


def test_a_broken_run_only_is_half_the_experiment():
    learner, _ = one([run("Ada", "mask_after_softmax", minutes=5)])
    assert learner.mask_after_softmax_at == at(5) and learner.reached("experiment") is None
    assert table_rows([learner], UTC)[0]["experiment"] == "missing a correct causal run"


def test_an_explanation_without_the_experiment_runs_counts_as_explained_only():
    learner, _ = one([by_owner(run("Ada", "no_scaling", minutes=3, explanation="Rows still sum to 1."))])
    assert learner.reached("explain") == at(3)
    assert learner.reached("experiment") is None and learner.reached("predict") is None
    assert learner.other_modes == {"No sqrt(d_k) scaling"}


def test_every_checkpoint_is_reached_at_the_run_that_completed_it():
    runs = [run("Ada", "correct", minutes=1, prediction="Token 2 cannot see token 3."),
            run("ada ", "no_mask", minutes=2),
            run("ADA", "mask_after_softmax", minutes=7),
            by_owner(run("Ada", "mask_after_softmax", minutes=9, explanation="The row sum fell below 1.")),
            run("Ada", "correct", minutes=11, prediction="again")]
    learner, _ = one(runs)
    assert learner.runs == 5
    assert (learner.predicted_at, learner.experimented_at, learner.explained_at) == (at(1), at(7), at(9))
    assert learner.other_modes == {"No mask"}
    row = table_rows([learner], ZoneInfo("Europe/Paris"))[0]
    assert row["experiment"] == "2025-01-31 10:22"  # T0 is 09:15 UTC, Paris is UTC+1 in January


@pytest.mark.parametrize(("mode", "causal", "T"), [("mask_after_softmax", False, 3),
                                                    ("mask_after_softmax", True, 1),
                                                    ("correct", False, 3)])
def test_runs_that_show_no_contrast_do_not_complete_the_experiment(mode, causal, T):
    runs = [run("Ada", "correct"), run("Ada", mode, causal=causal, T=T)] if mode != "correct" else \
        [run("Ada", "mask_after_softmax"), run("Ada", mode, causal=causal, T=T)]
    learner, _ = one(runs)
    assert learner.reached("experiment") is None
    assert len(learner.other_modes) == 1  # listed by its title, e.g. "…, nothing to mask: bidirectional"


def test_an_explanation_the_record_alone_carries_is_not_credited():
    """An imported record, or one whose link someone else held: nothing says the learner wrote it."""
    learner, _ = one([run("Ada", "correct", minutes=1, explanation="The row sum fell below 1.")])
    assert learner.explained_at is None and table_rows([learner], UTC)[0]["explain"] == "missing"


def test_runs_without_a_learner_name_are_counted_apart():
    learners, unnamed = learner_checkpoints([run(None), run("   "), run("Grace")], ["Ada"])
    assert [r.learner for r in learners] == ["Ada", "Grace"] and unnamed == 2


# Spellings of one learner (spaces, case, casefold's ß), no name at all, and text that is only
# whitespace (which str.strip() drops: the store must tell it from text the same way).
NAMES = ["Ada", " ada", "ADA ", "Grace", "grace\t", "Straße", "STRASSE", "Émile", "émile", "Lin",
         None, "", "   ", "\u3000\x85"]
TEXTS = [None, "", " ", "\u3000\x85\u2028", "\t\n", "x", " Row 2 keeps its sum. ", "\u00a0p\u00a0"]


def varied_runs(count: int, seed: int) -> list[ExperimentRecord]:
    """``count`` runs of every failure mode, causal or not, T 1 to 3, by the names above, one
    minute apart in a shuffled order (so a store cannot rely on the order runs arrive in)."""
    rng = random.Random(seed)
    minutes = rng.sample(range(count * 3), count)
    return [run(rng.choice(NAMES), rng.choice(list(FAILURE_MODES)), causal=rng.random() < 0.7,
                T=rng.choice([1, 2, 3]), minutes=m, prediction=rng.choice(TEXTS),
                explanation=rng.choice(TEXTS))
            for m in minutes]


def oldest_first(runs):
    return sorted(runs, key=lambda r: r.created_datetime)


def test_whitespace_is_what_python_strips():
    assert WHITESPACE == "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())


def test_the_stores_group_by_counts_as_python_does_over_every_run(store_url):
    # A seed whose sample holds every case the asserts below need (re-chosen when the three
    # layer modes of issue 23 joined FAILURE_MODES and changed what each seed draws).
    runs = varied_runs(160, seed=16)
    saved, imported = runs[::2], runs[1::2]  # half saved by their page (with its key), half imported
    with RunStore(store_url) as store:
        for record in saved:
            store.save(record, key_hash=OWNER)
        store.import_records(imported)
        class_list = ["Lin", "  Nobody ", "straße"]
        summaries = [*map(by_owner, saved), *map(RunSummary.of, imported)]
        expected = learner_checkpoints(oldest_first(summaries), class_list)
        assert class_checkpoints(store.learner_runs(), class_list) == expected
        learners, unnamed = expected
        assert unnamed > 0 and any(r.other_modes for r in learners) and any(r.experimented_at for r in learners)
        # Explanations are credited, but not the imported ones: crediting every record's would differ.
        every_text = learner_checkpoints(oldest_first(map(by_owner, runs)), class_list)[0]
        assert any(r.explained_at for r in learners) and [r.explained_at for r in every_text] != [
            r.explained_at for r in learners]
        assert [r.learner.casefold() for r in learners] == ["ada", "grace", "lin", "nobody", "strasse", "émile"]
        # one stored spelling is one entry; blank names are only counted
        tally = store.learner_runs()
        assert sorted(r.learner for r in tally.learners) == sorted({n for n in NAMES if n and n.strip()}
                                                                   & {r.learner for r in runs})
        assert tally.unnamed == unnamed
        # the same filters as the runs table
        kept = RunFilter(learner="ada", created_before=T0 + timedelta(minutes=240))
        assert class_checkpoints(store.learner_runs(kept)) == learner_checkpoints(oldest_first(
            r for r in summaries if "ada" in (r.learner or "").casefold() and r.created_datetime < kept.created_before))


def test_whitespace_only_text_is_no_prediction_or_explanation_in_the_store_either(store_url):
    runs = [run("Ada", prediction="\u3000\x85", explanation=" \t", minutes=1),
            run("Ada", prediction=" p ", minutes=2), run("Ada", explanation="\u2028e", minutes=3)]
    with RunStore(store_url) as store:
        for record in runs:
            store.save(record, key_hash=OWNER)
        (ada,), unnamed = class_checkpoints(store.learner_runs())
    assert (ada.runs, ada.predicted_at, ada.explained_at, unnamed) == (3, at(2), at(3), 0)


def test_the_view_filters_to_who_is_missing_what_and_exports_csv(tmp_path):
    runs = [run("Ada", "correct", prediction="p"), run("Ada", "mask_after_softmax"),
            run("Grace", "mask_after_softmax", explanation="e"), run(None)]
    store = sqlite_store(tmp_path)
    for record in runs:
        store.save(record, key_hash=OWNER)
    view = LearnersView(store, lambda: UTC, class_list="Ada\nGrace\nLin\n")
    assert list([r["learner"] for r in view.rows]) == ["Ada", "Grace", "Lin"]
    assert "1 run without a learner name counted apart" in view.summary.object
    view.show = "Missing experiment"
    assert list([r["learner"] for r in view.rows]) == ["Grace", "Lin"]
    view.show = "Missing explain"
    assert list([r["learner"] for r in view.rows]) == ["Ada", "Lin"]
    view.show = "Missing predict"
    rows = list(csv.DictReader(io.StringIO(learners_csv(view._rows()))))
    assert [r["learner"] for r in rows] == ["Grace", "Lin"] and tuple(rows[0]) == COLUMNS
    assert rows[0]["experiment"] == "missing a correct causal run"
    assert "<th scope='row'>Grace</th>" in view.table.object
    view.class_list = "<b>Lin</b>"
    assert "&lt;b&gt;Lin&lt;/b&gt;" in view.table.object
    view.class_list = ""
    view.show = "Anyone"
    assert list([r["learner"] for r in view.rows]) == ["Ada", "Grace"]
    store.save(run("Lin", "correct", minutes=5))
    view.refresh()
    assert list([r["learner"] for r in view.rows]) == ["Ada", "Grace", "Lin"]
