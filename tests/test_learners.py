"""The instructor's learners view: seed 003's checkpoints counted per learner, from their runs."""

from __future__ import annotations

import csv
import io
from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

import pytest
from store_helpers import T0

from app.instructor.learners import (
    COLUMNS,
    LearnersView,
    learner_checkpoints,
    learners_csv,
    table_rows,
)
from attention_core import scaled_dot_product_attention
from attention_core.records import ExperimentRecord


def run(learner: str | None, mode: str = "correct", *, causal: bool = True, T: int = 3, minutes: int = 0,
        **text) -> ExperimentRecord:
    result = scaled_dot_product_attention([1.0] * T, [1.0, 2.0, 9.0][:T], causal=causal, failure_mode=mode)
    return ExperimentRecord.from_result(result, created_at=T0 + timedelta(minutes=minutes), learner=learner, **text)


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
    learner, _ = one([run("Ada", "no_scaling", minutes=3, explanation="Rows still sum to 1.")])
    assert learner.reached("explain") == at(3)
    assert learner.reached("experiment") is None and learner.reached("predict") is None
    assert learner.other_modes == {"No sqrt(d_k) scaling"}


def test_every_checkpoint_is_reached_at_the_run_that_completed_it():
    runs = [run("Ada", "correct", minutes=1, prediction="Token 2 cannot see token 3."),
            run("ada ", "no_mask", minutes=2),
            run("ADA", "mask_after_softmax", minutes=7),
            run("Ada", "mask_after_softmax", minutes=9, explanation="The row sum fell below 1."),
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


def test_runs_without_a_learner_name_are_counted_apart():
    learners, unnamed = learner_checkpoints([run(None), run("   "), run("Grace")], ["Ada"])
    assert [r.learner for r in learners] == ["Ada", "Grace"] and unnamed == 2


def test_the_view_filters_to_who_is_missing_what_and_exports_csv():
    runs = [run("Ada", "correct", prediction="p"), run("Ada", "mask_after_softmax"),
            run("Grace", "mask_after_softmax", explanation="e"), run(None)]
    view = LearnersView(lambda: runs, lambda: UTC, class_list="Ada\nGrace\nLin\n")
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
