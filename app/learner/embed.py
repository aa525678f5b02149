"""The learner page made to sit in a course page: ``/embed``, an iframe 610 px high.

The Self-attention lesson embeds the workbench as an explorable (``:::explorable{… height="610"
id="attention-workbench"}``) and completes its *experiment* checkpoint on the event
``experiment-recorded`` from that instance. This page is the learner page itself (one
:class:`~app.learner.page.LearnerPage`, its state and its views) laid out for the frame: the
inputs, toggles, failure mode, both heat maps and the checks on the first tab, the rest (row
steps and readouts, saved runs and their comparison, input mode and presets) one click away.

The page and the course page talk with ``postMessage``, only with the origins the server trusts
(``serve --embed-origin``; none by default, and then not at all):

- once it listens, the page posts ``{type: "explorable-event", instanceId, event: "ready"}``;
- on every saved run the page posts ``{type: "explorable-event", instanceId, event:
  "experiment-recorded", run: {id, created_at, failure_mode, causal, total_future_weight,
  min_row_sum, failed_checks}, url}`` to its parent, with the parent's exact origin as the target
  (``url`` opens the run in the full workbench);
- the course page may pass the learner's name and prediction in, as ``?learner=…&prediction=…``
  on the frame's address or as a message ``{type: "explorable-context", instanceId, learner,
  prediction}``; either is learner text like any other (cut to ``TEXT_LIMITS``, saying so, and
  only ever shown as text). Until a prediction is there (passed in or written in the Saved runs
  tab) the weights, the checks and the readouts wait for it: the lesson's predict checkpoint
  comes first. ``?instanceId=`` names the instance (default
  ``attention-workbench``); a message naming another instance is ignored.
"""

from __future__ import annotations

import panel as pn
import param
from panel.custom import JSComponent

from app.learner.checks import InvariantsView
from app.learner.matrices import hidden_note_html
from app.learner.page import LearnerPage
from app.learner.record import STATUS_CSS
from app.shared.html import Markup, html
from app.shared.parsing import displayable
from app.shared.static import read_text
from app.shared.widgets import Reflowing
from attention_core.records import TEXT_LIMITS, ExperimentRecord

DEFAULT_INSTANCE = "attention-workbench"  # the Self-attention lesson's explorable id
EVENT_TYPE, CONTEXT_TYPE, RECORDED = "explorable-event", "explorable-context", "experiment-recorded"
HOST_FIELDS = ("learner", "prediction")
MAP_SIZE = 160  # two maps side by side (each 140 px wider than this) in a 640 px column
TITLE = "Self-attention workbench (embedded)"
PREDICTION_TAB = "Prediction and saved runs"  # where the embed asks for the prediction and keeps the runs
HIDDEN_NOTE_EMBED = f"Write your prediction in the {PREDICTION_TAB} tab to see the weights and checks."



class ExplorableBridge(JSComponent):
    """Posts ``ready`` to the parent window once it listens and :attr:`message` whenever it
    changes; hands a trusted parent's context message to :attr:`received`.

    A custom component because Panel has no way to reach the parent window: neither posting
    to it nor hearing from it. Both directions check the parent's origin against
    :attr:`trusted_origins` in the browser, where the origin is known; with none, nothing is
    posted and nothing heard.
    """

    trusted_origins = param.List(default=[], item_type=str, doc="Exact origins to talk to.")
    instance_id = param.String(default=DEFAULT_INSTANCE, doc="This explorable instance's id.")
    message = param.Dict(default={}, doc="The last event posted (the browser adds ``url``).")
    received = param.Dict(default={}, doc="learner and/or prediction from the parent, until taken.")

    _esm = "embed_bridge.js"


def recorded_event(record: ExperimentRecord, instance_id: str = DEFAULT_INSTANCE) -> dict:
    """The ``experiment-recorded`` message for a saved run, as the Self-attention lesson's
    experiment checkpoint expects it (``url`` is added in the browser, which knows the address
    the learner reaches).

    Numbers are the record's own (``None`` where not finite); ``failed_checks`` a list of check
    names, empty for a correct run.
    """
    return {"type": EVENT_TYPE, "instanceId": instance_id, "event": RECORDED, "run": {
        "id": record.id, "created_at": record.created_at, "failure_mode": record.failure_mode,
        "causal": record.causal, "total_future_weight": record.total_future_weight,
        "min_row_sum": record.min_row_sum, "failed_checks": list(record.failed_checks)}}


def host_text(text: str, field: str) -> tuple[str, str]:
    """Text the course page passed for ``field`` ("learner" or "prediction"), without the
    characters learner text never keeps (:func:`~app.shared.parsing.displayable`), at most its
    ``TEXT_LIMITS`` characters, and what the page says when it was longer (else "")."""
    text, limit = displayable(text), TEXT_LIMITS[field]
    if len(text) <= limit:
        return text, ""
    return text[:limit], (f"The course page passed a {field} of {len(text)} characters; the first "
                          f"{limit} were kept (the limit).")


def passed_in_html(learner: str, prediction: str) -> Markup:
    """What the first tab says about the record fields (in the Prediction and saved runs tab): whose runs these
    are and the prediction Save run will store, escaped, or where to write the prediction."""
    who = html("Learner: <b data-testid='embed-learner'>{}</b>. ", learner) if learner else ""
    if not prediction.strip():
        return html("<p>{}Save run needs your prediction: write it in the <b>{}</b> tab.</p>", who, PREDICTION_TAB)
    shown = prediction if len(prediction) <= 120 else prediction[:119] + "…"
    return html("<p>{}Prediction: <q data-testid='embed-prediction'>{}</q></p>", who, shown)


_HINT_CSS = read_text(__package__, "embed_hint.css")


class EmbedPage(pn.viewable.Viewer):
    """The learner page in tabs for a 610 px frame, and its bridge to the course page."""

    page = param.ClassSelector(class_=LearnerPage, doc="The learner page laid out here.")
    trusted_origins = param.List(default=[], item_type=str, doc="Course sites to talk to.")
    instance_id = param.String(default=DEFAULT_INSTANCE, doc="This explorable instance's id.")
    host_message = param.String(default="", doc="What was cut from text the course page passed in.")

    def __init__(self, **params):
        super().__init__(**params)
        if self.page is None:
            self.page = LearnerPage(map_size=MAP_SIZE)
        # The tabs lay out every view at once, matrix mode's controls too, but for the ablation
        # panel (no room for it), which would otherwise compute every edit in matrix mode for no one.
        self.page.ablations = False
        self.page.make_below_maps()
        self.page.make_item_select()
        self.page.make_opened()
        self.page.make_row_message()
        self.page.inputs.make_tokens_message()
        self.page.inputs.make_layer_controls()
        p, s = self.page, self.page.state
        i = p.inputs
        s.predict_first = True  # revealed as soon as the course page passes a prediction in
        p.matrices.hidden_note.object = hidden_note_html(HIDDEN_NOTE_EMBED)
        self.bridge = ExplorableBridge(trusted_origins=list(self.trusted_origins),
                                       instance_id=self.instance_id, visible=False)
        self.bridge.param.watch(lambda e: self.take_host_text(e.new), "received")
        s.param.watch(self._post, "last_saved")
        self.invariants = InvariantsView(state=s)
        self.passed_in = pn.pane.HTML(pn.bind(passed_in_html, s.param.learner, s.param.prediction),
                                      stylesheets=[_HINT_CSS], margin=(0, 10), sizing_mode="stretch_width")
        self.host_note = pn.pane.HTML(pn.bind(lambda m: html("<div class='status error' role='status'>{}</div>", m)
                                              if m else "", self.param.host_message),
                                      visible=pn.bind(bool, self.param.host_message),
                                      stylesheets=[STATUS_CSS], sizing_mode="stretch_width")
        r = p.record
        i.tokens.width, i.failure_mode.width = 70, 230  # side by side in 340 px
        # The PNG buttons stay on the full page: here the frame's height goes to the maps.
        m = p.matrices
        for heatmap in (m.scores, m.weights, *m.item_scores, *m.item_weights, *m.masks.values()):
            heatmap.save_button.visible = False
        p.contributions.chart_width = 300  # two side by side in 640 px
        # The inputs column is as wide as its widest grid, at least 340 px: the notes in it wrap
        # at 320 px rather than stretch it, so a wide head's grid pushes the checks right instead
        # of running under them.
        # The preset button's label takes two lines in the checks' column: tighter, so the
        # first tab still fits the frame's height.
        expose = p.banner.expose
        p.banner.exposure_note.stylesheets = [*p.banner.exposure_note.stylesheets,
                                              ".notice { padding: 4px 8px; font-size: 12px; line-height: 1.3; }"]
        expose.stylesheets = [*expose.stylesheets,
                              ".bk-btn { font-size: 12px; line-height: 1.2; padding: 2px 8px; }"]
        for note in (i.tokens_message, i.mode_note, i.mask_note):
            note.param.update(sizing_mode="stretch_width", max_width=320)  # fixed needs a height too (Bokeh W-1005)
        inputs = pn.Column(
            pn.Row(i.tokens, i.failure_mode, margin=0), i.tokens_message, i.mode_note, i.grid_column,
            i.toggles, i.mask_note,
            # Save run and the prediction it stores under the toggles: the checks' column beside
            # is the taller one (a mode this input cannot show adds its note and preset there).
            pn.Row(r.button, self.passed_in, margin=0), r.message,
            margin=0, styles={"min-width": "340px"})
        # Why no check fails in a broken mode on this input, and the preset that shows it: beside
        # the checks it explains.
        checks = pn.Column(self.invariants, p.banner.exposure_note, expose, sizing_mode="stretch_width", margin=0)
        # Each tab fills the frame and scrolls within it, under tab headers that stay in view.
        tab = dict(scroll=True, sizing_mode="stretch_both", margin=0)
        # The failure modes' pictures (lost mass, the scaling pair) go with the readouts they draw:
        # under the maps they would push the first tab past the frame's height.
        pictures = m.take_pictures()
        m.legend.stylesheets = [*m.legend.stylesheets, ".cell-legend { font-size: 12px; }"]
        workbench = pn.Column(p.opened, pn.Row(inputs, checks, margin=0), p.matrices, **tab)
        steps = pn.Column(pn.Row(p.item, p.row, p.row_message, margin=0), p.banner.pane, pictures,
                          p.readouts, p.steps,
                          p.contributions, p.projections, **tab)
        runs = pn.Column(self.host_note, p.prediction, pn.Row(r.learner, r.label, margin=0), p.runs, **tab)
        more = pn.Column(i.input_mode, pn.Row(i.d_k, i.d_v, i.d_model, margin=0), i.layer_controls,
                         pn.pane.HTML("<b>Presets</b>", margin=(5, 10, 0, 10)),
                         pn.FlexBox(*i.presets, margin=(0, 6)), **tab)
        self.tabs = pn.Tabs(("Workbench", workbench), ("Row steps and readouts", steps),
                            (PREDICTION_TAB, runs), ("Input mode and presets", more),
                            sizing_mode="stretch_both", margin=0)

    def _post(self, event) -> None:
        if event.new is not None and self.trusted_origins:
            self.bridge.message = recorded_event(event.new, self.instance_id)

    def take_host_text(self, texts: dict) -> None:
        """Put the course page's ``learner`` and ``prediction`` (strings; others ignored) into
        the record fields, each cut to its limit with :attr:`host_message` saying so."""
        notes, update = [], {}
        for field in HOST_FIELDS:
            if isinstance(texts.get(field), str):
                update[field], note = host_text(texts[field], field)
                notes.append(note)
        if update:
            self.page.state.param.update(**update)
            self.host_message = " ".join(n for n in notes if n)
        if texts:
            self.bridge.received = {}  # taken: the same text sent again is taken again

    def serve_session(self) -> EmbedPage:
        """Set the browser session up: the learner page's own (:meth:`LearnerPage.serve_session`),
        then the instance id and the learner text on this page's address. Returns the page."""
        self.page.serve_session(notice_in_header=False)  # the embed has no header bar
        args = pn.state.session_args or {}

        def arg(name: str) -> str | None:
            values = args.get(name)
            return values[0].decode("utf-8", "replace") if values else None

        instance = arg("instanceId")
        if instance:
            self.instance_id = self.bridge.instance_id = instance[:100]
            self.page.runs.link_query = {"instanceId": self.instance_id}  # Open reloads this page
        self.take_host_text({f: arg(f) for f in HOST_FIELDS if arg(f) is not None})
        return self

    def __panel__(self):
        return pn.Column(self.tabs, self.bridge, self.page.page_key, sizing_mode="stretch_both", margin=0)


def create_embed(store=None, trusted_origins: list[str] | None = None) -> EmbedPage:
    """One session's embedded learner page over ``store``, talking to ``trusted_origins``."""
    pn.config.design = Reflowing  # this session's: focus rings and rows that wrap
    page = LearnerPage(store=store, map_size=MAP_SIZE)
    return EmbedPage(page=page, trusted_origins=list(trusted_origins or [])).serve_session()
