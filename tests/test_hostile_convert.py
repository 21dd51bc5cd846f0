"""`replay convert` of hostile files: nothing in a cassette's text runs, whatever is installed.

vcrpy before 8.3 reads YAML with a loader that builds any Python object a tag names, so a
suite migrating from an old vcrpy could run a command by converting a file. replay reads the
text with a safe loader of its own: each file here must be refused in one line, and the
command it carries must not run.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from commands import replay_text
from test_hostile_small import vcrpy_yaml

import replay
from replay.convert.files import convert

OLD_VCRPY = "6.0.2"  # reads YAML with yaml.CLoader / yaml.Loader: tags build Python objects


def hostile_yaml(marker: Path) -> str:
    """A vcrpy cassette whose request body, read by an unsafe loader, creates `marker`."""
    command = json.dumps(f"touch {shlex.quote(str(marker))}")  # a YAML double-quoted string
    return vcrpy_yaml(f"!!python/object/apply:os.system\n    - {command}")


@pytest.fixture(scope="module")
def old_vcrpy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vcrpy 6.0.2, installed into a folder of its own that goes first on `PYTHONPATH`."""
    target = tmp_path_factory.mktemp("vcrpy-old")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    subprocess.run(
        [*pip, "--target", str(target), f"vcrpy=={OLD_VCRPY}"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return target


def with_old_vcrpy(target: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *sys.path[1:]])}


def test_the_old_vcrpy_itself_would_run_the_command(old_vcrpy: Path, tmp_path: Path) -> None:
    """The hazard is real: vcrpy 6.0.2's own reader runs what the file names."""
    marker, cassette = tmp_path / "ran", tmp_path / "evil.yaml"
    cassette.write_text(hostile_yaml(marker))
    script = (
        "import vcr, sys; from vcr.serializers import yamlserializer; "
        f"assert vcr.__version__ == {OLD_VCRPY!r}, vcr.__version__; "
        "yamlserializer.deserialize(open(sys.argv[1]).read())"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(cassette)],
        env=with_old_vcrpy(old_vcrpy),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert marker.exists()


def test_convert_under_the_old_vcrpy_refuses_in_one_line_and_runs_nothing(
    old_vcrpy: Path, tmp_path: Path
) -> None:
    marker, cassette = tmp_path / "ran", tmp_path / "evil.yaml"
    cassette.write_text(hostile_yaml(marker))
    version = subprocess.run(
        [sys.executable, "-c", "import vcr; print(vcr.__version__)"],
        env=with_old_vcrpy(old_vcrpy),
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == OLD_VCRPY

    result = replay_text(
        "convert", str(cassette), str(tmp_path / "out.msgpack"), env=with_old_vcrpy(old_vcrpy)
    )

    assert result.returncode != 0
    assert not marker.exists()
    assert not (tmp_path / "out.msgpack").exists()
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("replay: error: ")
    assert "!!python/object/apply:os.system" in result.stderr
    assert "line 3" in result.stderr


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['true']",
        "!!python/object/new:os.system ['true']",
        "!!python/name:os.system",
        "!!python/module:os",
        "!!python/object:pathlib.PurePath {}",
    ],
    ids=["apply", "new", "name", "module", "object"],
)
def test_a_tag_that_builds_a_python_object_is_a_format_error(tmp_path: Path, tag: str) -> None:
    cassette = tmp_path / "evil.yaml"
    cassette.write_text(f"interactions:\n- request: {tag}\nversion: 1\n")
    with pytest.raises(replay.CassetteFormatError, match=r"refused: the YAML tag !!python/"):
        convert(cassette, tmp_path / "out.msgpack")
    assert not (tmp_path / "out.msgpack").exists()


def test_text_tags_of_python_2_era_cassettes_still_read(tmp_path: Path) -> None:
    cassette = tmp_path / "old.yaml"
    cassette.write_text(
        "interactions:\n"
        "- request:\n"
        "    body: !!python/unicode '{\"a\": 1}'\n"
        "    headers: {}\n"
        "    method: !!python/str POST\n"
        "    uri: http://127.0.0.1/v1\n"
        "  response:\n"
        "    body: {string: !!binary aGk=}\n"
        "    headers: {}\n"
        "    status: {code: 200, message: OK}\n"
        "version: 1\n"
    )
    convert(cassette, tmp_path / "out.msgpack")
    (interaction,) = replay.Cassette.load(tmp_path / "out.msgpack").interactions
    assert interaction.request.method == "POST"
    assert interaction.request.body == b'{"a": 1}'
    assert interaction.response.body == b"hi"
