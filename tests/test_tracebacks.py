"""What a failing test's traceback shows of replay: no secret, however long the report.

pytest's `--tb=long` prints every frame's arguments, and `--showlocals` every local: the
request as sent, secrets and all, sits in the frames it passes through. Replay's own frames on
that path are left out of the report (`replay.errors.hide_for_replay_errors`), the one that
raises holds the redacted error alone (`raise_bare`), and the reprs of replay's values show
no value that may be a secret. The client library's frames a replay error crossed are left
out of its report too (`replay.plugin.failure.replay_first`): they would show what the test
passed them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import replay
from replay.model import Chunk, Interaction, Request, Response
from replay.model.frames import Frame
from replay.testing import Origin, Script

pytest_plugins = ["pytester"]

SECRET = "Opaque0Secret0Unique0Zq"  # no key's shape: redacted by its names alone
KEY = "sk-proj-ReprKeyUnique0123456789abcdef"

#: One failing test per client, each sending `SECRET` in the query and the Authorization
#: header (the SDK: `KEY`) of a request the cassette cannot answer. The module's globals
#: hold them, as a suite's settings would: the test's own frame and source show neither.
CLIENTS = """
import aiohttp, httpx, openai, pytest, requests

URL = ORIGIN + "/echo?api_key={secret}&q=1"
HEADERS = {{"Authorization": "Bearer {secret}"}}
SDK = {{"api_key": "{key}", "default_query": {{"api_key": "{secret}"}}}}
MARK = pytest.mark.use_cassette("recorded", record_mode="none")

@MARK
def test_httpx():
    httpx.get(URL, headers=HEADERS)

@MARK
@pytest.mark.asyncio
async def test_httpx_async():
    async with httpx.AsyncClient() as client:
        await client.get(URL, headers=HEADERS)

@MARK
def test_requests():
    requests.get(URL, headers=HEADERS)

@MARK
@pytest.mark.asyncio
async def test_aiohttp():
    async with aiohttp.ClientSession() as client:
        await client.get(URL, headers=HEADERS)

@MARK
def test_openai():
    openai.OpenAI(base_url=ORIGIN, max_retries=0, **SDK).models.list()
"""
TESTS = ("test_httpx", "test_httpx_async", "test_requests", "test_aiohttp", "test_openai")

#: The line that closes each entry of a long traceback: `path:line: ` (and the error's name).
LOCATION = re.compile(r"^(?P<path>\S+\.py):\d+: ?(?P<error>\w*)$")


@pytest.fixture
def origin() -> Iterator[Origin]:
    with Origin({"/echo": Script(echo=True)}) as server:
        yield server


def frames(output: str) -> list[tuple[str, list[str]]]:
    """The entries of the long tracebacks in `output`, as (file, their lines); lines after
    the last entry of a traceback (replay's report section, the short summary) come under
    the file of the next entry, or "" at the end."""
    entries, lines = [], []
    for line in output.splitlines():
        lines.append(line)
        location = LOCATION.match(line)
        if location:
            entries.append((location["path"], lines))
            lines = []
    return [*entries, ("", lines)]


def test_long_tracebacks_with_locals_show_no_secret_through_replay(
    pytester: pytest.Pytester, origin: Origin
) -> None:
    recorded = Interaction(Request(method="GET", url=f"{origin.url}/echo"), Response(status=200))
    path = pytester.path / "cassettes" / "test_clients" / "recorded.msgpack"
    replay.Cassette([recorded]).save(path)
    header = f"ORIGIN = {origin.url!r}\n"
    pytester.makepyfile(test_clients=header + CLIENTS.format(secret=SECRET, key=KEY))
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")

    result = pytester.runpytest_subprocess(
        "-p", "no:recording", "--tb=long", "--showlocals", timeout=120
    )

    result.assert_outcomes(failed=len(TESTS))
    assert origin.requests == []
    found = frames(result.stdout.str())
    files = {path: (pytester.path / path).resolve() for path, _ in found if path}
    # No line shows a secret: not replay's (its frames, its error, its report section), not
    # pytest's summary, and no client library frame: the report of a replay error leaves
    # them out (the test's frames, then the one replay raised it in).
    showing = {path for path, lines in found for line in lines if SECRET in line or KEY in line}
    assert showing == set()
    assert not any(path and is_client(files[path]) for path, _ in found)
    # Replay shows one frame a test: the one raising its error, which holds that error alone.
    from_replay = [lines[-1] for path, lines in found if path and is_replay(files[path])]
    assert len(from_replay) == len(TESTS)
    assert all(line.endswith(": CassetteMismatchError") for line in from_replay)


def is_replay(path: Path) -> bool:
    return path.is_relative_to(REPLAY)


def is_client(path: Path) -> bool:
    """Whether `path` is a file of an installed library but replay (a client library's)."""
    return "site-packages" in path.parts and not is_replay(path)


REPLAY = Path(replay.__file__).resolve().parent


# -- reprs ------------------------------------------------------------------------------------

URL_WITH_SECRETS = (
    f"https://user:{SECRET}@api.test/v1/keys/{KEY}/items?api_key={SECRET}&model=m;x={SECRET}"
    f"&{KEY}#access_token={SECRET}"
)


def test_a_request_repr_shows_names_never_values() -> None:
    body = f'{{"password": "{SECRET}"}}'.encode()
    request = Request(
        method="POST",
        url=URL_WITH_SECRETS,
        headers=[("Authorization", f"Bearer {SECRET}"), ("X-Custom", SECRET)],
        body=body,
    )

    shown = repr(request)

    assert SECRET not in shown
    assert KEY not in shown
    assert shown == (
        "Request(method='POST', url='https://…@api.test/v1/keys/REDACTED/items"
        "?api_key=…&model=…&…#…', headers=['Authorization: …', 'X-Custom: …'], "
        f"body=<{len(body)} bytes>)"
    )


def test_a_response_repr_shows_no_header_value_nor_body() -> None:
    payload = f"token={KEY}".encode()
    response = Response(
        status=200,
        headers=[("Set-Cookie", f"session={SECRET}")],
        chunks=[Chunk(0.1, payload), Chunk(0.2, b"x")],
    )

    shown = repr(response)

    assert SECRET not in shown
    assert KEY not in shown
    assert shown.startswith("Response(status=200, headers=['Set-Cookie: …'], headers_at=0.0, ")
    assert f"chunks=<2 chunks, {len(payload) + 1} bytes>" in shown


def test_an_interaction_repr_is_made_of_those() -> None:
    request = Request(method="GET", url=URL_WITH_SECRETS)
    response = Response(status=204)
    shown = repr(Interaction(request, response))
    assert shown == f"Interaction(request={request!r}, response={response!r})"
    assert SECRET not in shown
    frames = (
        Frame(0.1, "client", "text", SECRET.encode()),
        Frame(0.2, "server", "close", b"\x03\xe8"),
    )
    shown = repr(Interaction(request, Response(status=101), frames=frames))
    assert shown.endswith(", frames=<2 frames>)")
    assert SECRET not in shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param("http://h.test/a?b=&c", "http://h.test/a?b=&…", id="empty-value-and-bare"),
        pytest.param("http://[::1/x?k=v", "<17 characters>", id="unparsable"),
        pytest.param("/relative/path", "/relative/path", id="relative"),
    ],
)
def test_odd_urls_are_shown_without_their_values(url: str, shown: str) -> None:
    assert f"url={shown!r}" in repr(Request(method="GET", url=url))


def test_reprs_need_nothing_but_the_model_module() -> None:
    # `replay.model` imports at load time only its chunk columns and WebSocket frames
    # (`replay.model.chunks`, `replay.model.frames`, which import nothing else of replay): a
    # repr may import only what imports nothing back (no circle, even through an import
    # inside a function): the key shapes, in a package whose `__init__` holds nothing but its
    # docstring.
    text = textwrap.dedent(
        """
        import sys
        from replay.model import Request
        repr(Request(method="GET", url="http://h.test/sk-proj-0123456789abcdefghijkl?a=1"))
        loaded = sorted(name for name in sys.modules if name.startswith("replay."))
        expected = ["replay.model", "replay.model.chunks", "replay.model.frames", "replay.redact",
                    "replay.redact.shapes"]
        assert sorted(loaded) == expected, loaded
        """
    )
    subprocess.run([sys.executable, "-c", text], check=True, timeout=60)
