"""What a pytest user feels: the plugin's start-up and a suite of 200 tests (benchmarks 8, 9).

8. Start-up: `pytest --co -q` of a one-test suite with replay's plugin, minus the same with
   `-p no:replay`: what installing replay adds to every pytest run, cassettes used or not.
9. A generated suite of `TESTS` tests, each POSTing its own JSON body and reading a
   `EVENTS`-event SSE answer through a module-level `httpx.Client`, run with one cassette per
   test and `--record-mode=none`:

   - floor: the same `httpx.Client()`, with an `httpx.MockTransport` building the same answer
     mounted for every URL (so the floor builds the client's default transport too);
   - replay: `@pytest.mark.use_cassette` (default path: `cassettes/<module>/<test>.msgpack`);
   - pytest-recording: `@pytest.mark.vcr` (default path: `cassettes/<module>/<test>.yaml`,
     written by vcrpy's own persister).

   The floor and replay run with `-p no:recording`. pytest-recording runs with replay's
   plugin loaded too, as a project that installed both has it (they share `--record-mode`),
   and is measured against a floor run with both plugins loaded.

Every contender runs in a fresh `python -m pytest -q -p no:cacheprovider` process, the
contenders take turns round by round, and the figure is the median wall time of the
process; the overhead per test is (contender - its floor) / `TESTS`.
"""

from __future__ import annotations

import atexit
import json
import os
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from vcrpy_files import save_vcr_cassette  # beside this script

import replay
from replay.adapters.httpx_capture import request_from_httpx

TESTS = 200
EVENTS = 20
URL = "https://api.openai.com/v1/responses"
SSE_HEADERS = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]

# The answer each test gets, built the same way by the floor's handler and the cassettes.
ANSWER_CODE = """
def answer(question):
    return [
        ('data: {"type":"response.output_text.delta","sequence_number":%d,'
         '"delta":" token","question":%s}\\n\\n' % (i, question)).encode()
        for i in range(EVENTS)
    ]
"""

HEADER = f"""import json

import httpx
import pytest

URL = {URL!r}
EVENTS = {EVENTS}
{ANSWER_CODE}

def ask(number):
    payload = {{"model": "gpt-4.1", "input": f"Question number {{number}}?", "stream": True}}
    with client.stream("POST", URL, json=payload) as response:
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert len(events) == EVENTS
"""

FLOOR_CLIENT = f"""

class ListStream(httpx.SyncByteStream):
    def __init__(self, chunks):
        self.chunks = chunks

    def __iter__(self):
        yield from self.chunks


def handler(request):
    question = json.dumps(json.loads(request.content)["input"])
    return httpx.Response(200, headers={SSE_HEADERS!r}, stream=ListStream(answer(question)))


# The contenders' very client, `httpx.Client()` (its default transport built, with its SSL
# context and httpcore: some 40-80 ms a process), with the mock mounted for every URL.
client = httpx.Client(mounts={{"all://": httpx.MockTransport(handler)}})
"""


def payload(number: int) -> dict[str, object]:
    return {"model": "gpt-4.1", "input": f"Question number {number}?", "stream": True}


def answer(number: int) -> list[bytes]:
    namespace: dict[str, object] = {"EVENTS": EVENTS}
    exec(ANSWER_CODE, namespace)  # the very code the generated tests run
    build = namespace["answer"]
    question = json.dumps(payload(number)["input"])
    chunks: list[bytes] = build(question)  # type: ignore[operator]
    return chunks


def module_text(marker: str, client: str) -> str:
    """The test module: HEADER, the client line, and `TESTS` tests under `marker`."""
    tests = [f"{marker}def test_{n:03d}():\n    ask({n})\n" for n in range(TESTS)]
    return HEADER + client + "\n\n" + "\n\n".join(tests)


def interaction(client: httpx.Client, number: int) -> replay.Interaction:
    built = client.build_request("POST", URL, json=payload(number))
    chunks = [replay.Chunk(0.2 + 0.01 * i, data) for i, data in enumerate(answer(number))]
    response = replay.Response(status=200, headers=SSE_HEADERS, headers_at=0.2, chunks=chunks)
    return replay.Interaction(request_from_httpx(built), response)


def write_suite(root: Path) -> dict[str, Path]:
    """The three suites (and the floor once more, for pytest-recording's runs) under `root`."""
    suites = {
        "floor": ("", FLOOR_CLIENT),
        "use_cassette": ("@pytest.mark.use_cassette\n", "\nclient = httpx.Client()\n"),
        "vcr": ("@pytest.mark.vcr\n", "\nclient = httpx.Client()\n"),
    }
    made = {}
    builder = httpx.Client()
    for name, (marker, client) in suites.items():
        folder = root / name
        (folder / "cassettes" / "test_suite").mkdir(parents=True)
        (folder / "pytest.ini").write_text("[pytest]\n")
        (folder / "test_suite.py").write_text(module_text(marker, client))
        made[name] = folder
    for n in range(TESTS):
        recorded = interaction(builder, n)
        directory = "cassettes/test_suite"
        replay.Cassette([recorded]).save(made["use_cassette"] / directory / f"test_{n:03d}.msgpack")
        save_vcr_cassette(made["vcr"] / directory / f"test_{n:03d}.yaml", [recorded])
    return made


BASE = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]


CPU_SECONDS: dict[str, list[float]] = {}
"""CPU seconds (user + system) of each contender's processes, by name, as `rounds` ran."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_BYTECODE: list[str] = []


def python_env() -> dict[str, str]:
    """The environment of every measured process: bytecode cached, as on a user's machine.

    pip compiles what it installs, and Python caches what it imports, but this project is
    installed editable and some machines set `PYTHONDONTWRITEBYTECODE`: left as is, replay
    (and each test module) would be compiled from source in every process while the other
    packages load their bytecode. So every process here writes and reads its bytecode under
    one temporary `PYTHONPYCACHEPREFIX` (the warm-up rounds fill it), the same for every
    contender, and nothing is written beside any source.
    """
    if not _BYTECODE:
        folder = tempfile.mkdtemp(prefix="replay-bench-bytecode-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _BYTECODE.append(folder)
    env = {**os.environ, "PYTHONPYCACHEPREFIX": _BYTECODE[0]}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_pytest(folder: Path, options: Sequence[str]) -> float:
    """Wall seconds of one `pytest` process in `folder`; fails loudly if a test failed."""
    env = python_env()
    start = time.perf_counter()
    done = subprocess.run(
        [*BASE, *options], cwd=folder, capture_output=True, text=True, env=env, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 5):  # 5: no tests collected (never here)
        raise RuntimeError(f"pytest failed in {folder}:\n{done.stdout[-3000:]}{done.stderr}")
    return elapsed


@dataclass
class Contender:
    name: str
    folder: Path
    options: tuple[str, ...]


def rounds(contenders: Sequence[Contender], repeats: int, warmup: int) -> list[list[float]]:
    """Wall seconds of each contender's process, round by round, in rotating order."""
    times: list[list[float]] = [[] for _ in contenders]
    for number in range(warmup + repeats):
        shift = number % len(contenders)
        for index in [*range(shift, len(contenders)), *range(shift)]:
            contender = contenders[index]
            cpu = _children_cpu()
            elapsed = run_pytest(contender.folder, contender.options)
            if number >= warmup:
                times[index].append(elapsed)
                spent = _children_cpu() - cpu
                CPU_SECONDS.setdefault(contender.name, []).append(spent)
    return times


# --- 8. start-up ----------------------------------------------------------------------------


def startup_suite(root: Path) -> Path:
    folder = root / "startup"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_one.py").write_text("def test_one():\n    pass\n")
    return folder


def startup_times(root: Path, repeats: int) -> tuple[list[float], list[float]]:
    """(without replay's plugin, with it): wall seconds of `pytest --co -q`, interleaved."""
    folder = startup_suite(root)
    common = ("--co", "-p", "no:recording")
    contenders = [
        Contender("`-p no:replay`", folder, (*common, "-p", "no:replay")),
        Contender("replay's plugin loaded", folder, common),
    ]
    without, with_plugin = rounds(contenders, repeats, warmup=2)
    return without, with_plugin


def _importtime(code: str) -> list[tuple[str, float, int]]:
    """(module, cumulative seconds, depth) of each import `python -X importtime -c CODE`
    made, in the order they finished; from a second run, so that bytecode is cached."""
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            env=python_env(),
            capture_output=True,
            text=True,
            check=False,
        )
    entries = []
    for line in done.stderr.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if found:
            entries.append((found[4], int(found[2]) / 1e6, len(found[3]) // 2))
    return entries


def plugin_imports(limit: int = 8) -> tuple[float, list[tuple[str, float]]]:
    """What importing replay's plugin costs once pytest is imported (`python -X importtime`;
    pytest's own imports of plugins bypass it): its cumulative seconds and the modules it
    imports directly, costliest first."""
    entries = _importtime("import pytest, replay.plugin.hooks")
    index = next((i for i, e in enumerate(entries) if e[0] == "replay.plugin.hooks"), None)
    if index is None:
        return 0.0, []
    _, total, depth = entries[index]
    children = []
    for name, seconds, level in reversed(entries[:index]):
        if level <= depth:
            break
        if level == depth + 1:
            children.append((name, seconds))
    return total, sorted(children, key=lambda item: item[1], reverse=True)[:limit]


def first_use_imports(folder: Path) -> float:
    """Seconds the plugin's first cassette costs in imports, once a run: `replay.session.lifecycle`
    and `replay.session.naming` (what the marker imports), imported by a test in a pytest process
    run as the suite's are, in `folder` (made here): after pytest, its plugins (which may
    import some of the same modules, attrs among them), httpx and replay's plugin."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_first.py").write_text(
        "import httpx\n\n\ndef test_first_cassette():\n"
        "    import replay.session.lifecycle, replay.session.naming\n"
    )
    command = [
        BASE[0],
        "-X",
        "importtime",
        *BASE[1:],
        "-s",
        "--record-mode=none",
        "-p",
        "no:recording",
    ]
    for _ in range(2):  # the second with the bytecode cached
        done = subprocess.run(
            command,
            cwd=folder,
            env=python_env(),
            capture_output=True,
            text=True,
            check=False,
        )
    total = 0.0
    for line in done.stderr.splitlines():
        found = re.match(
            r"import time:\s+\d+ \|\s+(\d+) \| (replay\.session|replay\.naming)$", line
        )
        if found:
            total += int(found[1]) / 1e6
    return total


# --- 9. the suite ---------------------------------------------------------------------------


def suite_contenders(folders: dict[str, Path]) -> list[Contender]:
    alone = ("--record-mode=none", "-p", "no:recording")
    both = ("--record-mode=none",)
    return [
        Contender("MockTransport (floor)", folders["floor"], alone),
        Contender("replay, `@pytest.mark.use_cassette`", folders["use_cassette"], alone),
        Contender("MockTransport, pytest-recording loaded (its floor)", folders["floor"], both),
        Contender("pytest-recording, `@pytest.mark.vcr`", folders["vcr"], both),
    ]


PARTS = (
    (
        "plugin",
        (
            "replay/plugin/hooks.py",
            "replay/plugin/run.py",
            "replay/session/imposed.py",
            "replay/plugin/summary.py",
        ),
    ),
    ("session", ("replay/session.py", "replay/engine/modes.py")),
    (
        "loading",
        (
            "replay/store.py",
            "replay/store/load.py",
            "replay/store/validate.py",
            "replay/store/walk.py",
            "replay/store/msgpack_bytes.py",
        ),
    ),
    ("match index", ("replay/matching.py", "replay/matching/keys.py")),
    ("patches", ("replay/adapters/patch.py",)),
    (
        "redaction",
        ("replay/redact/redactor.py", "replay/redact/json_bodies.py", "replay/redact/shapes.py"),
    ),
    (
        "lookup and play",
        ("replay/store/cassette.py", "replay/engine/", "replay/adapters/playback.py"),
    ),
    ("adapters", ("replay/adapters/",)),
)


def _part(path: str) -> str | None:
    for name, prefixes in PARTS:
        if any(prefix in path for prefix in prefixes):
            return name
    return None


def profile_replay_suite(folder: Path, out: Path) -> pstats.Stats:
    """One run of replay's suite under cProfile, in a process of its own."""
    command = [sys.executable, "-m", "cProfile", "-o", str(out), *BASE[1:]]
    subprocess.run(
        [*command, "--record-mode=none", "-p", "no:recording"],
        cwd=folder,
        env=python_env(),
        capture_output=True,
        check=True,
    )
    return pstats.Stats(str(out))


def breakdown(stats: pstats.Stats, tests: int) -> list[str]:
    """replay's own time per part (each function's time outside its callees, summed by
    file), and the costliest functions by cumulative time, per test."""
    entries: dict[tuple[str, int, str], tuple[object, ...]] = stats.stats  # type: ignore[attr-defined]
    package = f"{Path(replay.__file__).parent}/"
    own = dict.fromkeys((name for name, _ in PARTS), 0.0)
    for (path, _line, name), entry in entries.items():
        part = _part(path)
        if part is not None and path.startswith(package) and name != "<module>":
            own[part] += float(entry[2])  # type: ignore[arg-type]
    ranked = sorted(
        (
            (f"{path.removeprefix(package)}:{line} {name}", float(entry[3]), int(entry[1]))  # type: ignore[arg-type,call-overload]
            for (path, line, name), entry in entries.items()
            if path.startswith(package) and name != "<module>"
        ),
        key=lambda item: item[1],
        reverse=True,
    )[:14]
    lines = [
        "| part of replay (own time: outside callees) | µs per test |",
        "|---|---:|",
        *(f"| {part} | {seconds / tests * 1e6:.0f} |" for part, seconds in own.items()),
        "",
        "| function (cumulative: callees included) | µs per test | calls |",
        "|---|---:|---:|",
        *(
            f"| `replay/{where}` | {cum / tests * 1e6:.0f} | {calls:,} |"
            for where, cum, calls in ranked
        ),
    ]
    return lines


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        folders = write_suite(Path(tmp))
        contenders = suite_contenders(folders)
        times = rounds(contenders, 1, 0)
        for c, t in zip(contenders, times, strict=True):
            print(c.name, median(t))
        stats = profile_replay_suite(folders["use_cassette"], Path(tmp) / "p.out")
        print("\n".join(breakdown(stats, TESTS)))
        print(plugin_imports())
