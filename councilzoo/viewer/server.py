"""The viewer's local web server (standard library only): the page, and the folder as JSON.

A server rather than one static HTML file because a 10,000-episode folder is tens of megabytes
of records: the page loads a compact index once and asks for one conversation at a time, and
reads training curves afresh, so a run still training shows its latest steps on reload.

Routes: ``/`` the page and ``/static/*`` its scripts and styles (package data, nothing from the
network); ``/api/index``; ``/api/episode/<i>``; ``/api/training/<i>``; ``/api/report/<i>`` (a
``report.md`` as HTML); ``/api/image/<i>/<k>`` (an episode's k-th image); ``/files/<path>``
(reports' figures). Every file it sends is inside the folder, whatever a record names.
An ``/api/`` route for an episode or run the folder does not hold answers 404 with JSON
``{"error": "<what the folder holds>"}``, which the page shows in place of the content; a record
the page cannot show answers 422 the same way, never a dropped connection.

A folder someone sent you is untrusted: it listens on 127.0.0.1 only, answers only requests whose
``Host`` is its own (``127.0.0.1:<port>`` or ``localhost:<port>``: a web page that points its own
name at 127.0.0.1, DNS rebinding, gets 421), and the page renders every text of the folder as
text; ``report.md`` becomes HTML here, through markdown-it with raw HTML off (it is escaped) and
its link check (no ``javascript:`` URLs).
"""

from __future__ import annotations

import json
import math
import mimetypes
import sys
import threading
from functools import cached_property
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from urllib.parse import unquote, urlsplit

from councilzoo.viewer.folder import MalformedRecord, NotInFolder, OutputFolder

__all__ = ["HOST", "ViewerServer", "serve"]

HOST = "127.0.0.1"
HOST_NAMES = (HOST, "localhost")  # the names a request may give in Host:, with the port
DEFAULT_PORT = 8765
STATIC = resources.files("councilzoo.viewer") / "static"


def _finite(value):
    """``value`` with NaN and infinities as None: Python writes them, JSON (and browsers) refuse them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _to_json(data) -> bytes:
    return json.dumps(_finite(data)).encode()


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    protocol_version = "HTTP/1.1"  # one kept-alive connection for the page's requests

    def log_message(self, format: str, *args) -> None:  # noqa: A002  (the page's requests are not news)
        pass

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        route = unquote(urlsplit(self.path).path)
        folder = self.server.folder
        if self.headers.get("Host") not in self.server.hosts:
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST, "this server answers only to " + self.server.url)
            return
        try:
            if route == "/favicon.ico":
                self.send_response(HTTPStatus.NO_CONTENT)
                self.end_headers()
            elif route == "/":
                self._send(STATIC.joinpath("index.html").read_bytes(), "text/html; charset=utf-8")
            elif route.startswith("/static/") and ".." not in route:
                asset = STATIC.joinpath(*route.removeprefix("/static/").split("/"))
                self._send(asset.read_bytes(), mimetypes.guess_type(route)[0] or "application/octet-stream")
            elif route == "/api/index":
                self._send(self.server.index_json, "application/json")
            elif route.startswith("/api/episode/"):
                self._json(folder.episode(int(route.rsplit("/", 1)[1])))
            elif route.startswith("/api/training/"):
                self._json(folder.training(int(route.rsplit("/", 1)[1])))
            elif route.startswith("/api/report/"):
                self._json(folder.report(int(route.rsplit("/", 1)[1])))
            elif route.startswith("/api/image/"):
                index, k = (int(part) for part in route.removeprefix("/api/image/").split("/"))
                self._file(folder.image_file(index, k))
            elif route.startswith("/files/"):
                self._file(folder.file_inside(folder.root / route.removeprefix("/files/")))
            else:
                self.send_error(HTTPStatus.NOT_FOUND)
        except NotInFolder as err:  # the page shows this message instead of waiting for the episode
            self._json({"error": str(err)}, HTTPStatus.NOT_FOUND)
        except MalformedRecord as err:
            self._json({"error": str(err)}, HTTPStatus.UNPROCESSABLE_ENTITY)
        except (ValueError, IndexError, FileNotFoundError):
            if route.startswith("/api/"):
                self._json({"error": f"{route}: not found in this folder"}, HTTPStatus.NOT_FOUND)
            else:
                self.send_error(HTTPStatus.NOT_FOUND)

    def _file(self, path: Path | None) -> None:
        if path is None or not path.is_file():
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        self._send(path.read_bytes(), mimetypes.guess_type(path.name)[0] or "application/octet-stream")

    def _json(self, data, status: HTTPStatus = HTTPStatus.OK) -> None:
        self._send(_to_json(data), "application/json", status)

    def _send(self, body: bytes, content_type: str, status: HTTPStatus = HTTPStatus.OK) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")  # a reload shows what the folder holds now
        self.end_headers()
        self.wfile.write(body)


class ViewerServer(ThreadingHTTPServer):
    """Serves one ``OutputFolder`` at ``url`` (port 0: any free port)."""

    daemon_threads = True

    def __init__(self, folder: OutputFolder, port: int = DEFAULT_PORT) -> None:
        self.folder = folder
        try:
            super().__init__((HOST, port), _Handler)
        except (OSError, OverflowError) as err:
            reason = getattr(err, "strerror", None) or err
            raise ValueError(f"--port {port}: cannot listen ({reason}); --port 0 takes a free one") from None

    @cached_property
    def hosts(self) -> frozenset[str]:
        """The ``Host`` headers it answers: its own names and port (DNS rebinding gives another)."""
        return frozenset(f"{name}:{self.server_address[1]}" for name in HOST_NAMES)

    @cached_property
    def index_json(self) -> bytes:
        return _to_json(self.folder.index())

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"

    def start(self) -> ViewerServer:
        """Serve from a background thread (tests, benchmarks); ``shutdown()`` stops it."""
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


def serve(out: str, port: int = DEFAULT_PORT, open_browser: bool = False) -> int:
    """``councilzoo view OUT``: index the folder, then serve it until Ctrl-C."""
    folder = OutputFolder(out)
    server = ViewerServer(folder, port)
    found = [(len(folder.locations), "episode"), (len(folder.run_names), "episode log"),
             (len(folder.trainings), "training run"), (len(folder.reports), "report")]
    counts = ", ".join(f"{n:,} {noun}{'' if n == 1 else 's'}" for n, noun in found)
    print(f"councilzoo view: {folder.root}: {counts}", flush=True)
    for problem in folder.skipped:
        print(f"councilzoo view: skipped {problem}", file=sys.stderr, flush=True)
    print(f"open {server.url}  (Ctrl-C stops)", flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
