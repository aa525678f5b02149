"""A learner's page driven over Bokeh's websocket protocol by hand, for classes of hundreds (issue 25).

``bokeh.client`` keeps a whole Document per learner and applies every patch the server sends;
with its learners as threads of one Python process, the class bench's own client used 75–99 %
of a core from 150 sessions and its waits became the figures. A :class:`WireLearner` sends what
BokehJS sends for the same actions, as the protocol's JSON (document ready, the page key, a grid
cell's edit, a field's value, a button's click), and reads the server's messages only as far as
it must: every header, and a patch's content as text, parsed only until the model ids it needs
are found. All learners share one asyncio loop in one thread.

Bokeh's protocol (checked on Bokeh 3.9): a message is a header, metadata and content, each a
text frame, then per buffer a header frame and a binary frame; the server sends ``ACK`` first,
the client asks ``PULL-DOC-REQ`` and gets the document; each side sends ``PATCH-DOC`` events.
A model is named in an event by ``{"id": …}``; a Bokeh event (``document_ready``,
``button_click``, Panel's ``data_event``) travels as a ``MessageSent`` event.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import threading
import time

import classroom
from common import send_frames_at_once

HOST = "127.0.0.1"
OPENERS = 4  # pages opening at once, as a class arriving over a minute or two
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _shared_loop() -> asyncio.AbstractEventLoop:
    """The one event loop every WireLearner runs on, in a daemon thread of its own."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, daemon=True, name="wire-learners").start()
        return _loop


def _objects(tree, found: dict[str, dict]) -> dict[str, dict]:
    """Every model written out in full in a document's or a patch's JSON, by id."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "object" and "id" in node and "name" in node:
                found[node["id"]] = node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _ref(model_id: str) -> dict:
    return {"id": model_id}


def _bokeh_event(name: str, values: list) -> dict:
    """A Bokeh event as BokehJS sends it: a ``MessageSent`` patch event."""
    return {"kind": "MessageSent", "msg_type": "bokeh_event",
            "msg_data": {"type": "event", "name": name, "values": {"type": "map", "entries": values}}}


def _changed(model_id: str, attr: str, new) -> dict:
    return {"kind": "ModelChanged", "model": _ref(model_id), "attr": attr, "new": new}


class WireLearner:
    """One learner's page on ``HOST:port``: opened, then edited and saved while ``active``.

    The interface of the class bench's learners: ``start()``, ``join()``, the ``ready``,
    ``active`` and ``stop`` events, and what it did (``open_s``, ``edits``, ``saved``,
    ``not_saved``, ``error``). Edits are timed until the ``weights-source`` patch arrives, saves
    until the page's message names the run (or says "Not saved").
    """

    def __init__(self, index: int, port: int, tally, open_page, prefix: str = "bench learner"):
        self.index, self.port, self.tally, self._open_page = index, port, tally, open_page
        self.name_in_runs = f"{prefix} {index}"
        self.ready, self.active, self.stop = threading.Event(), threading.Event(), threading.Event()
        self.open_s: float | None = None
        self.error: str | None = None
        self.not_saved: list[str] = []
        self.saved: list[str] = []
        self.edits = 0
        self._future = None
        self._socket = None
        self._msgid = 0
        self._models: dict[str, dict] = {}
        self._needed = threading.Event()  # the record form's models were found
        self._waiting: tuple | None = None  # (predicate of a patch's text, future)

    def start(self) -> None:
        self._future = asyncio.run_coroutine_threadsafe(self._run(), _shared_loop())

    def join(self, timeout: float | None = None) -> None:
        if self._future is not None:
            try:
                self._future.result(timeout)
            except Exception:  # noqa: BLE001 - _run records its own errors
                pass

    async def _run(self) -> None:
        try:
            await self._open()
        except Exception as exc:  # noqa: BLE001 - reported in the results
            self.error = f"open: {exc!r}"
            self.ready.set()
            self._close()
            return
        try:
            await self._work()
        except Exception as exc:  # noqa: BLE001 - reported in the results
            self.error = repr(exc)
        finally:
            self.ready.set()
            self._close()

    def _close(self) -> None:
        if self._socket is not None:
            self._socket.close()

    async def _open(self) -> None:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        async with _openers():
            t = time.monotonic()
            token, cookies = await asyncio.get_running_loop().run_in_executor(None, self._open_page, self.port)
            request = HTTPRequest(f"ws://{HOST}:{self.port}/ws", headers={
                "Origin": f"http://{HOST}:{self.port}",
                "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())})
            self._socket = await websocket_connect(request, subprotocols=["bokeh", token],
                                                   max_message_size=100 * 2**20)
            send_frames_at_once(self._socket)
            header, _ = await self._read()
            if header["msgtype"] != "ACK":
                raise RuntimeError(f"the server's first message was {header['msgtype']}")
            await self._send("PULL-DOC-REQ", {})
            header, content = await self._read()
            if header["msgtype"] != "PULL-DOC-REPLY":
                raise RuntimeError(f"asked for the document, got {header['msgtype']}")
            _objects(json.loads(content), self._models)
            self.open_s = time.monotonic() - t
        self._grid, self._seq = self._grid_model(classroom._edited("default"))
        self._weights = self._named("weights-source")
        # The PageKey component's data model (app/learner/page_key.py), named after its class.
        key_model = next(i for i, m in self._models.items() if m["name"].startswith("PageKey"))
        self._reader = asyncio.ensure_future(self._read_all())
        # What BokehJS sends once it has drawn the page, then page_key.js's key.
        await self._send("PATCH-DOC", {"events": [_bokeh_event("document_ready", [])]})
        await self._send("PATCH-DOC", {"events": [_changed(key_model, "page_key", secrets.token_hex(16))]})

    def _named(self, name: str) -> str:
        return next(i for i, m in self._models.items() if m.get("attributes", {}).get("name") == name)

    def _grid_model(self, label: str) -> tuple[str, int]:
        """The input grid model holding cell ``label`` and its count of acknowledged edits."""
        for model_id, model in self._models.items():
            data = model.get("attributes", {}).get("data")
            attributes = self._models.get(data.get("id"), {}).get("attributes", {}) if isinstance(data, dict) else {}
            if any(label in row for row in attributes.get("labels") or []):
                return model_id, attributes.get("acked", 0)
        raise LookupError(f"no grid cell is named {label!r}")

    def _record_form(self) -> bool:
        """Find Save run, Learner, Label and Prediction among the models (sent after the first paint)."""
        def find(kind, test):  # Bokeh's model or Panel's of that name ("panel.models.widgets.Button")
            return next((i for i, m in self._models.items()
                         if m["name"].rsplit(".", 1)[-1] == kind and test(m.get("attributes", {}))), None)

        self._save = find("Button", lambda a: a.get("label") == "Save run")
        self._fields = {title: find(kind, lambda a, t=title: a.get("title") == t)
                        for title, kind in (("Learner", "TextInput"), ("Label", "TextInput"),
                                            ("Prediction", "TextAreaInput"))}
        return self._save is not None and None not in self._fields.values()

    async def _frame(self):
        frame = await self._socket.read_message()
        if frame is None:
            raise ConnectionError("disconnected")
        return frame

    async def _read(self) -> tuple[dict, str]:
        header = json.loads(await self._frame())
        await self._frame()  # metadata
        content = await self._frame()
        for _ in range(2 * header.get("num_buffers", 0)):  # each buffer's header and bytes
            await self._frame()
        return header, content

    async def _send(self, msgtype: str, content: dict) -> None:
        self._msgid += 1
        for frame in (json.dumps({"msgid": f"w{self._msgid}", "msgtype": msgtype, "num_buffers": 0}),
                      "{}", json.dumps(content)):
            await self._socket.write_message(frame)

    async def _read_all(self) -> None:
        """Read every message; look in patches for the models still needed and for a waited-for one."""
        while True:
            try:
                header, content = await self._read()
            except ConnectionError as exc:
                if self._waiting is not None and not self._waiting[1].done():
                    self._waiting[1].set_exception(exc)
                return
            if header["msgtype"] != "PATCH-DOC":
                continue
            if not self._needed.is_set():
                _objects(json.loads(content), self._models)
                if self._record_form():
                    self._needed.set()
            if self._waiting is not None and not self._waiting[1].done() and self._waiting[0](content):
                self._waiting[1].set_result(content)

    def _expect(self, predicate) -> asyncio.Future:
        """A future for the next patch from the server whose text satisfies ``predicate``; made
        before the message it answers is sent, so no reply can come first."""
        future = asyncio.get_running_loop().create_future()
        self._waiting = (predicate, future)
        return future

    async def _until(self, future: asyncio.Future, timeout: float) -> str:
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._waiting = None

    async def _work(self) -> None:
        deadline = time.monotonic() + classroom.WAIT_TIMEOUT_S
        while not self._needed.is_set():  # the record form comes after the first paint
            if time.monotonic() > deadline:
                raise TimeoutError(f"no Save run in {classroom.WAIT_TIMEOUT_S} s")
            await asyncio.sleep(0.1)
        await self._send("PATCH-DOC", {"events": [_changed(self._fields["Learner"], "value", self.name_in_runs)]})
        rng = random.Random(self.index)
        label = classroom._edited("default")
        weights = f'"id":"{self._weights}"'
        self.ready.set()
        while not self.stop.is_set():
            if not self.active.is_set():
                await asyncio.sleep(0.25)
                continue
            await asyncio.sleep(rng.uniform(*classroom.THINK_S))
            if self.stop.is_set() or not self.active.is_set():
                continue
            self._seq += 1
            edit = {"type": "map", "entries": [["seq", self._seq], ["label", label],
                                               ["text", f"{rng.uniform(-3, 3):.4f}"]]}
            t = time.monotonic()
            shown = self._expect(lambda text: weights in text.replace(" ", ""))
            await self._send("PATCH-DOC", {"events": [_bokeh_event("data_event", [
                ["model", _ref(self._grid)], ["data", edit]])]})
            try:
                await self._until(shown, classroom.WAIT_TIMEOUT_S)
            except TimeoutError:
                self.error = f"edit not shown in {classroom.WAIT_TIMEOUT_S} s"
                return
            self.tally.add("edits", time.monotonic() - t)
            self.edits += 1
            if self.edits % classroom.SAVE_EVERY == 0 and not await self._save_run():
                return

    async def _save_run(self) -> bool:
        """Label, Prediction, Save run, as a learner; timed until the message names the run."""
        name = f"save {len(self.saved) + len(self.not_saved) + 1}"
        await self._send("PATCH-DOC", {"events": [
            _changed(self._fields["Label"], "value", name),
            _changed(self._fields["Prediction"], "value", f"{self.name_in_runs}: row 3 moves towards key 3 ({name})")]})
        t = time.monotonic()
        # The page's message, "Saved run “save 3” (<id>)…", its quotes escaped or not in the JSON
        # (the Saved runs table's patch holds the label too, and "Saved runs").
        named = (f"Saved run \u201c{name}\u201d", f"Saved run \\u201c{name}\\u201d")
        said = self._expect(lambda text: any(n in text for n in named) or "Not saved:" in text)
        await self._send("PATCH-DOC", {"events": [_bokeh_event("button_click", [["model", _ref(self._save)]])]})
        try:
            text = await self._until(said, classroom.WAIT_TIMEOUT_S)
        except TimeoutError:
            self.error = f"{name} not confirmed in {classroom.WAIT_TIMEOUT_S} s"
            return False
        if not any(n in text for n in named):
            self.not_saved.append(text[text.index("Not saved:"):][:200])
            return True
        self.tally.add("saves", time.monotonic() - t)
        self.saved.append(name)
        return True


_opener_semaphore: asyncio.Semaphore | None = None


def _openers() -> asyncio.Semaphore:
    global _opener_semaphore
    if _opener_semaphore is None:
        _opener_semaphore = asyncio.Semaphore(OPENERS)
    return _opener_semaphore
