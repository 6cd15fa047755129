"""The console's HTTP server: stdlib, loopback only, in a daemon thread of the local stack.

    GET  /                      tasks by state per lambda and priority, gates, start-lag histograms
    GET  /tasks/<id>, /tasks?id one task and its errors per attempt
    GET  /dead-letters?...      dead letters, filtered by lambda, collection, error class, the oldest N
    POST /gates                 pause, drop or resume a lambda or a collection
    POST /dead-letters/redrive  redrive a filtered selection (optionally dry, at a drip rate, past `after`)
    GET  /waiting?...           waiting tasks, filtered by lambda, collection, state, run-time window
    POST /waiting               cancel, reschedule or reprioritise that selection (optionally dry, at a rate)
    POST /tasks/<id>/change     change the run time, priority or payload of a task not yet claimed
    GET  /api/snapshot          the overview as JSON, for `atf top --console-url`

A POST is refused (403) unless its Origin, or with no Origin its Referer, is
the console itself: any page a browser visits could otherwise post to a
console on loopback. What the core refuses (a filter, a form's field, a change
to a task already claimed) answers the API's status for it (400, 404, 409) with
the page as it was and the reason; a POST that is taken redirects to the page
that shows what it did, or shows it (200).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from pydantic import ValidationError

from atf_core.api import BulkRescheduleRequest, GateRequest
from atf_core.aws import make_clients
from atf_core.config import StackConfig
from atf_core.deadletters import DeadLetterFilter
from atf_core.errors import AtfError, InputError, from_validation
from atf_core.schema import gate_scope, utcnow
from atf_local.background import BackgroundServer, LocalHTTPServer
from atf_local.console import pages, waiting
from atf_local.console.data import ConsoleData

log = logging.getLogger("atf.console")
Form = dict[str, str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = _form(url.query)
        routes: dict[str, Callable[[Form], None]] = {
            "/": self._overview,
            "/dead-letters": self._dead_letters,
            "/waiting": self._waiting,
            "/api/snapshot": self._snapshot,
        }
        try:
            if url.path in routes:
                routes[url.path](query)
            elif url.path == "/tasks" or url.path.startswith("/tasks/"):
                task_id = unquote(url.path.removeprefix("/tasks").strip("/")) or query.get("id", "").strip()
                self._task(task_id, query.get("message", ""))
            else:
                self._html(HTTPStatus.NOT_FOUND, self._page("Not found", "", f"Nothing at {url.path}", error=True))
        except Exception:
            log.exception("console GET %s failed", self.path)
            failed = self._page("Error", "", "The console failed; see its log", error=True)
            self._html(HTTPStatus.INTERNAL_SERVER_ERROR, failed)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = _form(self.rfile.read(length).decode("utf-8", "replace")) if length else {}
        if not _from_console(self.headers.get("Origin"), self.headers.get("Referer"), self.headers.get("Host")):
            why = "Refused: a POST must name the console as its Origin (or, without one, its Referer)"
            self._html(HTTPStatus.FORBIDDEN, self._page("Refused", "", why, error=True))
            return
        try:
            self._post(urlsplit(self.path).path, form)
        except Exception:  # the page of a refusal reads the table too: say so rather than close without an answer
            log.exception("console POST %s failed", self.path)
            failed = self._page("Error", "", "The console failed; see its log", error=True)
            self._html(HTTPStatus.INTERNAL_SERVER_ERROR, failed)

    def _post(self, path: str, form: Form) -> None:
        try:
            if path == "/gates":
                self._redirect(self._gate(form))
            elif path == "/dead-letters/redrive":
                self._redrive(form)
            elif path == "/waiting":
                self._bulk(form)
            elif path.startswith("/tasks/") and path.endswith("/change"):
                self._change(unquote(path.removeprefix("/tasks/").removesuffix("/change")), form)
            else:
                self._html(HTTPStatus.NOT_FOUND, self._page("Not found", "", f"Nothing at {path}", error=True))
        except ValidationError as invalid:  # a gate's field the core's models refuse: named, nothing written
            self._overview({}, from_validation(list(invalid.errors())))
        except AtfError as refused:
            self._overview({}, refused)

    # -- pages ---------------------------------------------------------------
    def _overview(self, query: Form, refused: AtfError | None = None) -> None:
        data = self.server.data
        tasks = data.tasks()
        body = pages.overview(data.snapshot(tasks), data.lag_histograms(tasks), data.key_rows(tasks))
        refresh = query.get("refresh", "")
        self._answer("Overview", body, query.get("message", ""), refused, int(refresh) if refresh.isdigit() else None)

    def _task(self, task_id: str, message: str = "", refused: AtfError | None = None) -> None:
        task = self.server.data.task(task_id) if task_id else None
        if task is None:
            self._html(HTTPStatus.NOT_FOUND, self._page("Not found", "", f"No task {task_id!r}", error=True))
            return
        body = pages.task_page(task) + waiting.change_form(task, self.server.config)
        self._answer(f"Task {task.id}", body, message, refused)

    def _dead_letters(
        self,
        query: Form,
        message: str = "",
        refused: AtfError | None = None,
        carry_on: str = "",
        chosen: DeadLetterFilter | None = None,
    ) -> None:
        """The oldest dead letters of the selection (`chosen`, or the query's); past its `after` where a Go on
        went on (a dry run's lists what it reached), the page's redrive form acting on those."""
        config = self.server.config
        # The header's link names no lambda: the first one's. One named is checked, never swapped for another.
        form = query if query.get("lambda") else {**query, "lambda": next(iter(config.lambdas))}
        try:
            chosen = chosen or waiting.dead_letter_selection(config, form, utcnow())
            start = waiting.listing_start(form)
            after = start.position()
        except AtfError as bad_filter:
            self._refused_dead_letters(form, bad_filter)
            return
        letters, held = self.server.data.dead_letters(chosen, after), self.server.data.dead_letters_in(chosen)
        body = pages.dead_letters_page(config, form, chosen, letters, after=start.after, carry_on=carry_on, held=held)
        self._answer("Dead letters", body, message, refused)

    def _refused_dead_letters(self, form: Form, refused: AtfError) -> None:
        """The filter as typed, with the reason, and nothing listed: no redrive form for any other selection."""
        body = pages.dead_letters_page(self.server.config, form, None, [])
        self._answer("Dead letters", body, "", refused)

    def _waiting(self, query: Form, message: str = "", refused: AtfError | None = None, carry_on: str = "") -> None:
        found = None
        try:
            if any(query.get(name) for name in waiting.SELECTION_FIELDS):
                found = self.server.data.waiting(waiting.selection_request(query))
        except AtfError as bad_filter:
            refused = bad_filter
        body = waiting.waiting_page(self.server.config, query, found, carry_on)
        self._answer("Waiting tasks", body, message, refused)

    def _snapshot(self, query: Form) -> None:
        body = self.server.data.snapshot().model_dump_json(by_alias=True).encode()
        self._send(HTTPStatus.OK, "application/json", body)

    # -- actions -------------------------------------------------------------
    def _gate(self, form: Form) -> str:
        lambda_name, collection = form.get("lambda", ""), form.get("collection") or None
        action = form.get("action", "")
        scope = gate_scope(lambda_name, collection)
        if action == "resume":
            self.server.data.lift_gate(lambda_name, collection)
            return pages.back_to("/", message=f"Resumed {scope}")
        request = GateRequest.model_validate({"action": action, "reason": form.get("reason", "")})
        gate = self.server.data.set_gate(lambda_name, collection, request.action, request.reason)
        return pages.back_to("/", message=f"{gate.action.value.capitalize()} gate on {gate.scope}")

    def _redrive(self, form: Form) -> None:
        try:
            chosen = waiting.dead_letter_selection(self.server.config, form, utcnow())
        except AtfError as refused:  # a selection other than the page's: nothing written, nothing listed
            self._refused_dead_letters(form, refused)
            return
        try:
            options = waiting.redrive_options(form)
            which = form.get("which") or "listed"  # the button pressed: the letters listed, or those ticked
            if which not in ("listed", "ticked"):
                raise InputError(f"which: {which!r} is neither listed nor ticked", "which")
            if which == "ticked":  # those letters alone: the listing's place (after) is not theirs
                ticked = waiting.ticked_dead_letters(self.server.config, form)
                result = self.server.data.redrive(ticked, options.dry_run, options.per_second)
            else:
                result = self.server.data.redrive(chosen, options.dry_run, options.per_second, options.position())
        except AtfError as refused:  # nothing was written: the page stays as it was, with the reason
            self._dead_letters(form, refused=refused, chosen=chosen)
            return
        carry_on = pages.redrive_carry_on(chosen, form, result)
        self._dead_letters(form, pages.redrive_message(result), carry_on=carry_on, chosen=chosen)

    def _bulk(self, form: Form) -> None:
        action, now = form.get("action", ""), utcnow()
        try:
            request = waiting.selection_request(form, action)
            result = self.server.data.bulk(request, now)
        except AtfError as refused:  # nothing was written: the form stays as it was, with the reason
            self._waiting(form, refused=refused)
            return
        selection = {name: form[name] for name in waiting.SELECTION_FIELDS if form.get(name)}
        run_at = request.when(now) if isinstance(request, BulkRescheduleRequest) else None
        carry_on = waiting.carry_on_form(form, action, result, run_at)
        self._waiting(selection, waiting.bulk_message(action, result), carry_on=carry_on)

    def _change(self, task_id: str, form: Form) -> None:
        try:
            task = self.server.data.change(task_id, waiting.amendment_request(form).amendment(utcnow()))
        except AtfError as refused:  # nothing was written: the task's page as it is, with the reason
            self._task(task_id, refused=refused)
            return
        changed = f"Changed: {task.status.value}, priority {task.priority}, runs at {pages.when(task.next_at)} UTC"
        self._redirect(pages.back_to(f"/tasks/{quote(task_id)}", message=changed))

    # -- plumbing ------------------------------------------------------------
    def _page(self, title: str, body: str, message: str = "", error: bool = False) -> str:
        return pages.page(title, body, self.server.config, message, error)

    def _answer(
        self, title: str, body: str, message: str, refused: AtfError | None, refresh_s: int | None = None
    ) -> None:
        """A page with its message, or the refusal's code and reason, answering the status the API answers for
        that refusal (400 for input, 404, 409 for a conflict): a script that posts a form learns it from the
        status."""
        said, error = (_refusal(refused), True) if refused is not None else (message, False)
        html = self._page(title, body, said, error)
        if refresh_s is not None:
            html = html.replace("<head>", f'<head><meta http-equiv="refresh" content="{refresh_s}">', 1)
        self._html(HTTPStatus.OK if refused is None else HTTPStatus(refused.status), html)

    def _html(self, status: HTTPStatus, html: str) -> None:
        self._send(status, "text/html; charset=utf-8", html.encode())

    def _redirect(self, location: str) -> None:
        self.send_response(HTTPStatus.SEE_OTHER)
        self.send_header("Location", location)  # built by pages.back_to, already URL-encoded
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _refusal(refused: AtfError) -> str:
    """A refusal as the CLI says it: its code and reason, and the field where the reason does not name it."""
    field = f" ({refused.field})" if refused.field and refused.field not in str(refused) else ""
    return f"{refused.code}: {refused}{field}"


def _form(text: str) -> Form:
    return {key: values[-1] for key, values in parse_qs(text, keep_blank_values=True).items()}


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def _from_console(origin: str | None, referer: str | None, host: str | None) -> bool:
    """Whether a POST names one of the console's own pages as where it comes from.

    A browser sends Origin on every POST; "null" is an opaque page (a sandboxed frame, a data: or file: page)
    that any site can make. A request that names no page at all is refused too, rather than taken as some
    client that is no browser: nothing tells it from a browser that left both headers out, and a client
    that means it can send the console's Origin.
    """
    # The Host must be a loopback name too: a site whose name resolves to 127.0.0.1 (DNS rebinding) would
    # otherwise send its own name as both Host and Origin, and match.
    if not host or urlsplit(f"http://{host}").hostname not in LOOPBACK_NAMES:
        return False
    console = f"http://{host}"
    if origin is not None:
        return origin == console
    came_from = urlsplit(referer or "")
    return f"{came_from.scheme}://{came_from.netloc}" == console


class _Server(LocalHTTPServer):
    def __init__(self, port: int, config: StackConfig, data: ConsoleData) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.config = config
        self.data = data


class ConsoleServer(BackgroundServer):
    """The console on http://127.0.0.1:<port> (0: any free port)."""

    def __init__(self, config: StackConfig, endpoint: str, port: int = 8081) -> None:
        super().__init__(_Server(port, config, ConsoleData(make_clients(endpoint), config)), "atf-console")
