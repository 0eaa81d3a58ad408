"""What every server's door does with a request it refuses: a 400 with the reason, one line in the log.

A body that is not JSON is answered 400 with the parser's reason (:func:`parse_body`). An error the client was
answered with (bad input, a refused key or namespace, a model that could not be reached: each one's message is the
answer) is logged as one line without its traceback (:class:`AnsweredErrors`, which :func:`quiet_answered_errors`
puts on the handlers of the server's log): the servers log a failed run with its traceback, so without it every
refused run wrote dozens of frames. Any other exception keeps its traceback.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

from stores.errors import InputError, ModelError, raised_status
from surfaces.access import AccessError, Refused

ANSWERED: tuple[type[BaseException], ...] = (InputError, AccessError, ModelError, Refused)
"""Errors whose message is what the client is answered with."""

_RUN_FAILED_TWICE = "Run encountered an error in graph"
"""How langgraph-api logs a run's error before it logs the same run as failed: the first of two lines."""

_RAISED = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
"""A traceback's exception line (``stores.errors.InputError: the question is empty``)."""


def parse_body(raw: bytes) -> Any:
    """The JSON of a request body (``{}`` when empty); :class:`Refused` 400 with the parser's reason when not JSON."""
    try:
        return json.loads(raw or b"{}")
    except json.JSONDecodeError as exc:
        raise Refused(400, f"the request body is not JSON: {exc.msg} at offset {exc.pos}") from None


def log_failure(logger: logging.Logger, what: str, exc: BaseException, status: int, reason: str) -> None:
    """Log a failed request: one warning line with the answer it got, or its traceback when that was a bare 500."""
    if status != 500:
        logger.warning("%s: answered %d: %s", what, status, reason)
    else:
        logger.error(what, exc_info=exc)


def _names(classes: tuple[type[BaseException], ...]) -> set[str]:
    """The qualified names of ``classes`` and their subclasses, as a traceback writes them."""
    out: set[str] = set()
    todo = list(classes)
    while todo:
        cls = todo.pop()
        out.add(f"{cls.__module__}.{cls.__qualname__}")
        todo.extend(cls.__subclasses__())
    return out


def answered(exc: Any, text: Any = None) -> bool:
    """Whether ``exc`` (an exception, ``exc_info`` tuple or ``True``) or traceback ``text`` is an answered error."""
    exc = _exception(exc)
    if isinstance(exc, BaseException):
        return isinstance(exc, ANSWERED)
    if isinstance(text, str):
        raised = [m.group(1) for line in text.splitlines() if (m := _RAISED.match(line))]
        raised = [r for r in raised if r not in ("Traceback", "During")]
        return bool(raised) and raised[-1] in _names(ANSWERED)
    return False


class AnsweredErrors(logging.Filter):
    """Log an answered error as one warning line with its reason, without its traceback.

    The servers' other lines about the same error go: langgraph-api's first of two, and an error line that only
    repeats the error's message (Aegra writes it three times).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Make ``record`` one line when its error is an answered one; False for a line that says it again."""
        event = record.msg
        logged = event.get("exc_info") if isinstance(event, dict) else record.exc_info
        if isinstance(event, dict) and answered(logged, event.get("exception")):
            if str(event.get("event", "")).startswith(_RUN_FAILED_TWICE):
                return False
            raised = _exception(logged)
            reason = f": {type(raised).__name__}: {raised}" if isinstance(raised, BaseException) else ""
            kept = {k: v for k, v in event.items() if k not in ("exc_info", "exception")}
            record.msg = {**kept, "event": f"{event.get('event', '')}{reason}", "level": "warning"}
        elif record.exc_info and answered(record.exc_info):
            raised = _exception(record.exc_info)
            record.msg, record.args = f"{record.getMessage()}: {type(raised).__name__}: {raised}", None
            record.exc_info, record.exc_text = None, None
        else:
            text = str(event.get("event", "")) if isinstance(event, dict) else record.getMessage()
            return bool(logged) or record.levelno < logging.ERROR or not _restates(text)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _exception(exc_info: Any) -> Any:
    """The exception of an ``exc_info`` (``True``: the one being handled), else None."""
    if exc_info is True:
        return sys.exc_info()[1]
    if isinstance(exc_info, tuple):
        return exc_info[1] if len(exc_info) > 1 else None
    return exc_info if isinstance(exc_info, BaseException) else None


def _restates(text: str) -> bool:
    """Whether log line ``text`` ends with the message of an error this process raised and answered with."""
    cuts = [m.end() for m in re.finditer(r": |error=", text)]
    return any(raised_status(text[cut:]) is not None for cut in cuts)


def quiet_answered_errors() -> None:
    """Put :class:`AnsweredErrors` on every handler of the root logger and of the loggers that have their own."""
    loggers = [logging.getLogger(), *(v for v in list(logging.root.manager.loggerDict.values()))]
    for handler in {h for lg in loggers if isinstance(lg, logging.Logger) for h in lg.handlers}:
        if not any(isinstance(f, AnsweredErrors) for f in handler.filters):
            handler.addFilter(AnsweredErrors())
