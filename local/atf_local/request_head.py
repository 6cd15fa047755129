"""A request's head read as http.server reads it, with plain header lines taken without the email package.

http.server hands a request's header block to the email package's parser (http.client.parse_headers): a
general RFC 5322 parser, ~0.1 ms of CPU for the dozen lines an AWS SDK sends, and a fifth to a third of a
cheap call's time in the embedded AWS's servers (py-spy, a GetItem loop). Here a request whose line is
plain HTTP/1.0 or 1.1 has its header lines read with the same limits; where every line is a plain
`Name: value` field, the message is built from them directly, as the email parser would build it; any
other line (a folded value, a line that is not a field) goes to the email parser after all, and any other
request line to http.server's own parse. So the handler ends with the same command, path, version,
headers and keep-alive decision, or the same error answer, as http.server's parse_request gives.
"""

from __future__ import annotations

import email.parser
import http.client
import re
from collections.abc import Callable
from typing import Any

# http.client's limits on a head (its private _MAXLINE and _MAXHEADERS), which http.server applies
MAX_LINE = 65536
MAX_LINES = 100  # the blank line that ends the head counts, as there
# A field line as the email parser recognizes one: a name of printable characters but the colon, then a colon.
# "From " starts an mbox separator there, and a space or tab a folded line: neither is plain.
PLAIN_FIELD = re.compile(r"(?!From )[\041-\071\073-\176]+:")
PLAIN_VERSIONS = (b"HTTP/1.0", b"HTTP/1.1")
END = (b"\r\n", b"\n", b"")


def parse_request(handler: Any, standard: Callable[[], bool]) -> bool:
    """http.server's BaseHTTPRequestHandler.parse_request for `handler`, whose raw_requestline was read;
    `standard` is that method itself, for the request lines this does not take."""
    words = handler.raw_requestline.split()
    if len(words) != 3 or words[2] not in PLAIN_VERSIONS or words[1].startswith(b"//"):
        return standard()
    handler.command, handler.path, handler.request_version = (word.decode("iso-8859-1") for word in words)
    handler.requestline = handler.raw_requestline.decode("iso-8859-1").rstrip("\r\n")
    keeps_alive = handler.protocol_version >= "HTTP/1.1"
    handler.close_connection = not (keeps_alive and handler.request_version == "HTTP/1.1")
    try:
        handler.headers = _headers(_head_lines(handler.rfile))
    except http.client.LineTooLong as error:
        handler.send_error(431, "Line too long", str(error))
        return False
    except http.client.HTTPException as error:
        handler.send_error(431, "Too many headers", str(error))
        return False
    connection = handler.headers.get("Connection", "").lower()
    if connection == "close":
        handler.close_connection = True
    elif connection == "keep-alive" and keeps_alive:
        handler.close_connection = False
    expects = handler.headers.get("Expect", "").lower() == "100-continue"
    if expects and keeps_alive and handler.request_version >= "HTTP/1.1":
        return bool(handler.handle_expect_100())
    return True


def _head_lines(stream: Any) -> list[bytes]:
    """The head's lines up to and with the blank one, with http.client's limits and errors."""
    lines: list[bytes] = []
    while True:
        line = stream.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("header line")
        lines.append(line)
        if len(lines) > MAX_LINES:
            raise http.client.HTTPException(f"got more than {MAX_LINES} headers")
        if line in END:
            return lines


def _headers(lines: list[bytes]) -> http.client.HTTPMessage:
    texts = [line.decode("iso-8859-1") for line in lines]
    if not all(_plain(text) for text in texts[:-1]):
        return email.parser.Parser(_class=http.client.HTTPMessage).parsestr("".join(texts))
    message = http.client.HTTPMessage()
    for text in texts[:-1]:
        name, value = text.split(":", 1)
        message.set_raw(name, value.lstrip(" \t").rstrip("\r\n"))  # what the email parser keeps of a plain line
    return message


def _plain(text: str) -> bool:
    """A field line the email parser takes whole: a name and a colon, and no carriage return but at its end
    (the parser splits lines at a lone one too)."""
    return PLAIN_FIELD.match(text) is not None and "\r" not in text.removesuffix("\n").removesuffix("\r")
