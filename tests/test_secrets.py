"""Secrets never reach a cassette, a view, a log or an error message (issue 12).

Twenty-odd forms a credential takes, each a unique string, are sent for real to a local origin
(which echoes one back in a response header and sets a cookie), recorded, and then looked
for in everything replay makes of them: the cassette file, `replay show` in each form, the
YAML export, the `replay record` summary, a mismatch error (raised in the library, in a
program under `replay run`, and in a pytest failure report), `replay serve`'s 404 and log,
and `replay proxy`'s log and cassette. None may hold any of them.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import replay
from replay.run.report import summary_lines
from replay.testing import Origin, Script

# -- the forms ------------------------------------------------------------------------------

HF_KEY = "hf_PathKeyUnique0123456789abcdef"
#: The echo route: the server sends the `X-Debug` request header back as `x-echo-x-debug`.
ECHOED = "xoxb-123456789012-EchoedUniqueAbCdEf"
SERVER_COOKIE = "server-cookie-unique-9bQ"
USER_TOKEN = "userinfo-token-unique-4Kd"

HEADERS = {
    "Authorization": "Bearer opaque-authorization-unique-1aZ",
    "X-Amz-Security-Token": "amz-header-session-unique-2bY",
    "X-Auth-Token": "x-auth-token-unique-3cX",
    "Ocp-Apim-Subscription-Key": "azure-apim-unique-4dW",
    "Cookie": "session=cookie-jar-unique-5eV",
    "X-Goog-Api-Key": "goog-header-unique-6fU",
    "X-Client-Note": "sk-proj-NeutralHeaderUnique0123456789",  # a key by its shape only
    "X-Forwarded-Access": "Bearer forwarded-bearer-unique-7gT",  # a scheme, in any header
    "X-Debug": ECHOED,
}
QUERY = {
    "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
    "X-Amz-Credential": "AKIAUNIQUEQUERY00001/20240101/us-east-1/s3/aws4_request",
    "X-Amz-Signature": "amzsignatureunique8hS0123456789abcdef",
    "X-Amz-Security-Token": "amz-query-session-unique-9iR",
    "client_secret": "query-client-secret-unique-0jQ",
    "q": "AIzaQueryValueUnique0123456789abcdefghij",  # a Google key, by its shape
}
JSON_BODY: dict[str, Any] = {
    "model": "gpt-4.1",
    "max_output_tokens": 64,
    "api_key": "json-api-key-unique-1kP",
    "metadata": {"db": {"password": "json-nested-password-unique-2lO"}},
    "input": "please use ghp_ProseGithubUnique0123456789abcdef for it",
    "attachments": ["eyJhbGciOiJIUzI1NiJ9.eyJ1bmlxdWUiOiJqd3QtaW4tbGlzdCJ9.JwtSigUnique3mN"],
    "messages": [{"role": "user", "content": "sk-ant-api03-ContentUnique0123456789-xyz"}],
}
FORM = {
    "grant_type": "refresh_token",
    "client_secret": "form-client-secret-unique-4nM",
    "refresh_token": "form-refresh-token-unique-5oL",
}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _raw(value: str) -> str:
    """The secret part of a value: what follows a scheme or a cookie's name."""
    return value.rpartition(" ")[2].rpartition("session=")[2].partition("/")[0]


HARMLESS = {"gpt-4.1", "user", "AWS4-HMAC-SHA256", "refresh_token"}
#: Every secret sent, as the unique text to look for.
SECRETS = sorted(
    {
        *(_raw(value) for value in HEADERS.values()),
        *(_raw(value) for value in QUERY.values() if value not in HARMLESS),
        *(value for value in FORM.values() if value not in HARMLESS),
        "json-api-key-unique-1kP",
        "json-nested-password-unique-2lO",
        "ghp_ProseGithubUnique0123456789abcdef",
        JSON_BODY["attachments"][0],
        JSON_BODY["messages"][0]["content"],
        HF_KEY,
        SERVER_COOKIE,
        USER_TOKEN,
    }
)
#: What the live request of the mismatch sends instead: other secrets, looked for as well.
LIVE_SECRETS = {
    "api_key": "live-json-api-key-unique-6pK",
    "X-Auth-Token": "live-x-auth-token-unique-7qJ",
    "client_secret": "live-query-client-secret-unique-8rI",
}

KEYS_PATH = f"/v1/keys/{HF_KEY}/check"


def json_request(base: str, *, live: bool = False) -> httpx.Request:
    """The request holding most forms; `live`: as the mismatch sends it."""
    headers, query, body = dict(HEADERS), dict(QUERY), dict(JSON_BODY)
    if live:
        headers["X-Auth-Token"] = LIVE_SECRETS["X-Auth-Token"]
        query["client_secret"] = LIVE_SECRETS["client_secret"]
        body = {**body, "api_key": LIVE_SECRETS["api_key"], "max_output_tokens": 65}
    url = httpx.URL(f"{base}/v1/responses", params=query)
    return httpx.Request("POST", url, headers=headers, json=body)


def all_requests(base: str) -> list[httpx.Request]:
    """One request per kind of place: headers, query, JSON body; a form; a key in the path."""
    with_user = base.replace("http://", f"http://{USER_TOKEN}@")  # sent as Basic auth
    return [
        json_request(base),
        httpx.Request("POST", f"{base}/oauth/token", data=FORM),
        httpx.Request("GET", f"{with_user}{KEYS_PATH}"),
    ]


# -- the artefacts --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    sse = [(0.0, b'data: {"type": "response.completed"}\n\n')]
    routes = {
        "/v1/responses": Script(chunks=sse, echo_headers=("X-Debug",)),
        "/oauth/token": Script(
            chunks=[(0.0, b'{"ok": true}')],
            headers=[
                ("content-type", "application/json"),
                ("set-cookie", f"sid={SERVER_COOKIE}; HttpOnly"),
            ],
        ),
        KEYS_PATH: Script(chunks=sse),
    }
    with Origin(routes) as server:
        yield server


def replay_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "replay.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


class Server:
    """`replay serve` or `replay proxy` on a free port, and everything it prints."""

    def __init__(self, *args: str) -> None:
        self.process = replay_cli(*args, "--port", "0")
        assert self.process.stdout is not None
        self.lines: list[str] = []
        for line in self.process.stdout:  # up to the start line, which names the address
            self.lines.append(line)
            if "http://127.0.0.1:" in line:
                break
        printed = "".join(self.lines)
        assert "http://127.0.0.1:" in printed, printed
        self.url = printed[printed.index("http://127.0.0.1:") :].split()[0]
        self._reader = threading.Thread(target=self.lines.extend, args=(self.process.stdout,))
        self._reader.start()

    def stop(self) -> str:
        """Stop it as a user would (Ctrl-C) and return all it printed."""
        self.process.send_signal(signal.SIGINT)
        self.process.wait(20)
        self._reader.join(20)
        assert self.process.stdout is not None
        self.process.stdout.close()  # else collected later, a ResourceWarning in another test
        return "".join(self.lines)


#: A program sending the mismatch's live request (under `replay run`).
SEND_LIVE = """
import json, pathlib, httpx
live = json.loads((pathlib.Path(__file__).parent / "live.json").read_text())
httpx.post(live["url"], headers=live["headers"], content=live["body"])
"""

#: A test sending it through the library form (its failure report is the artefact).
TEST_LIVE = """
import json, pathlib, httpx, replay

MATCH_ON = (*replay.DEFAULT_MATCH_ON, "headers")

@replay.use_cassette({path!r}, record_mode="none", match_on=MATCH_ON)
def test_live():
    live = json.loads((pathlib.Path(__file__).parent / "live.json").read_text())
    httpx.post(live["url"], headers=live["headers"], content=live["body"])
"""


def send_all(client: httpx.Client, requests: list[httpx.Request]) -> list[httpx.Response]:
    responses = [client.send(request) for request in requests]
    assert [r.status_code for r in responses] == [200] * len(requests)
    return responses


@pytest.fixture(scope="module")
def artefacts(origin: Origin, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Everything replay made of the recorded secrets, as text, by name."""
    folder = tmp_path_factory.mktemp("secrets")
    path = folder / "secrets.msgpack"
    made: dict[str, str] = {}

    with httpx.Client() as client, replay.use_cassette(path, record_mode="all"):
        live = send_all(client, all_requests(origin.url))
    assert live[0].headers["x-echo-x-debug"] == ECHOED  # the server did echo it
    assert SERVER_COOKIE in live[1].headers["set-cookie"]
    made["cassette"] = path.read_bytes().decode("latin-1")
    made["record summary"] = "\n".join(summary_lines(path, replay.Cassette.load(path).interactions))

    # The live request of the mismatch, as a program and a test send it: from a file.
    live_request = json_request(origin.url, live=True)
    (folder / "live.json").write_text(
        json.dumps(
            {
                "url": str(live_request.url),
                "headers": dict(live_request.headers),
                "body": live_request.content.decode(),
            }
        )
    )
    (folder / "send_live.py").write_text(SEND_LIVE)
    (folder / "test_live.py").write_text(TEST_LIVE.format(path=str(path)))
    views = {
        "replay run stderr": replay_cli(
            "run", str(path), "--", sys.executable, str(folder / "send_live.py")
        ),
        "pytest report": subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:recording",
                "-p",
                "no:cacheprovider",
                str(folder / "test_live.py"),
            ],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ),
        "show": replay_cli("show", str(path)),
        "show --raw": replay_cli("show", "--raw", str(path)),
        "show --json": replay_cli("show", "--json", str(path)),
        "show --events": replay_cli("show", "--events", str(path)),
        "yaml export": replay_cli("convert", str(path), str(folder / "secrets.yaml")),
    }
    match_on = (*replay.DEFAULT_MATCH_ON, "headers")
    with (
        httpx.Client() as client,
        replay.use_cassette(path, record_mode="none", match_on=match_on),
        pytest.raises(replay.CassetteMismatchError) as mismatch,
    ):
        client.send(json_request(origin.url, live=True))
    made["mismatch error"] = str(mismatch.value)
    assert "body differs" in made["mismatch error"]

    serve = Server("serve", str(path), "--speed", "instant", "--repeat")
    with httpx.Client() as client:
        send_all(client, all_requests(serve.url))
        missed = client.send(json_request(serve.url, live=True))
    assert missed.status_code == 404
    made["serve 404"] = missed.text
    made["serve log"] = serve.stop()

    proxied = folder / "proxied.msgpack"
    proxy = Server("proxy", "--target", origin.url, "-o", str(proxied))
    with httpx.Client() as client:
        send_all(client, all_requests(proxy.url))
    made["proxy log"] = proxy.stop()
    made["proxy cassette"] = proxied.read_bytes().decode("latin-1")

    failing = {"replay run stderr": 1, "pytest report": 1}  # each meets the mismatch
    for name, process in views.items():
        output, _ = process.communicate(timeout=60)
        assert process.returncode == failing.get(name, 0), output
        made[name] = output
    assert "CassetteMismatchError" in made["replay run stderr"]
    assert "replay: unmatched requests" in made["pytest report"]
    made["yaml export"] = (folder / "secrets.yaml").read_text()
    return made


ARTEFACTS = [
    "cassette",
    "replay run stderr",
    "pytest report",
    "record summary",
    "show",
    "show --raw",
    "show --json",
    "show --events",
    "yaml export",
    "mismatch error",
    "serve 404",
    "serve log",
    "proxy log",
    "proxy cassette",
]


@pytest.mark.parametrize("artefact", ARTEFACTS)
def test_no_secret_reaches_any_artefact(artefacts: dict[str, str], artefact: str) -> None:
    text = artefacts[artefact]

    leaked = [secret for secret in [*SECRETS, *LIVE_SECRETS.values()] if secret in text]

    assert leaked == []
    assert text.strip()


def test_every_form_was_really_sent(origin: Origin, artefacts: dict[str, str]) -> None:
    """The test above proves something only if each secret did reach the origin."""
    seen = []
    for request in origin.requests:
        seen += [f"{name}: {value}" for name, value in request.headers]
        seen += [request.path, request.query, request.body.decode()]
        basic = request.header("authorization") or ""
        if basic.startswith("Basic "):
            seen.append(base64.b64decode(basic.removeprefix("Basic ")).decode())
    sent = "\n".join(seen)

    assert [s for s in SECRETS if s not in sent and s != SERVER_COOKIE] == []
    assert json.loads(origin.requests[0].body)["api_key"] == JSON_BODY["api_key"]


def test_the_secrets_are_replaced_not_dropped(artefacts: dict[str, str]) -> None:
    raw = artefacts["show --raw"]

    assert "> Authorization: REDACTED" in raw
    assert "> X-Forwarded-Access: Bearer REDACTED" in raw
    assert "< x-echo-x-debug: REDACTED" in raw
    assert "client_secret=REDACTED&refresh_token=REDACTED" in raw
    assert re.search(r'"max_output_tokens": ?64', raw)  # a count stays
    assert "> GET http://REDACTED@127.0.0.1:" in raw
    assert "/v1/keys/REDACTED/check" in raw
