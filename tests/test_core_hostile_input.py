"""Hostile tasks files get a short answer at once: alias bombs, oversized or deeply
included suites, files that are not tasks files and seeds that would fail every unit are
refused with exit 2, and no message quotes more than about 200 characters of a value.
(Plugins that raise while the registry is built: tests/test_core_hooks.py.)"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest
import yaml

from relbench.config import load_suite
from relbench.errors import ConfigError, QUOTE_LIMIT, short_repr
from relbench.names import valid_task_name

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from fuzz_tasks import alias_bomb  # noqa: E402

TASKS = """\
suite: {seeds: [0], num_anchors: 16}
tasks:
  - name: blobs
    description: two rotations of the blobs
    dataset: {name: toy-blobs, params: {classes: 4}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2}}
    grid:
      selectors: [random]
      similarities: [cosine]
      stitchers: [{name: relative, params: {epochs: 2}}]
    metrics: [accuracy]
"""
#: places where a string, a list of seeds or an integer is expected: (text, its replacement)
POSITIONS = {
    "description": ("two rotations of the blobs", "BOMB"),
    "seeds": ("seeds: [0]", "seeds: BOMB"),
    "parameter": ("epochs: 2", "epochs: BOMB"),
    "label": ("label: a", "label: BOMB"),
    "task name": ("name: blobs", "name: BOMB"),
    "plugin name": ("similarities: [cosine]", "similarities: [{name: BOMB}]"),
}


def _error(registry, path) -> str:
    """The ConfigError message of loading ``path``, which must come within a second of
    this process's CPU time (wall time stretches when other processes load the machine),
    or within five times what libyaml takes to parse the file into nodes, for a file whose
    sheer size makes that floor the larger (measured in the same process: a long test
    session's garbage collector slows both alike)."""
    t0 = time.process_time()
    try:
        if Path(path).is_file():  # never read a pipe or a device: the harness must not wait on one
            yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError, UnicodeDecodeError):
        pass  # a file libyaml refuses: the floor is what it took to refuse it
    floor = time.process_time() - t0
    t0 = time.process_time()
    with pytest.raises(ConfigError) as err:
        load_suite(path, registry)
    assert time.process_time() - t0 < max(1.0, 5 * floor)
    return str(err.value)


def _bombed(write_yaml, position: str, levels: int) -> Path:
    anchors, alias = alias_bomb(levels)
    old, new = POSITIONS[position]
    return write_yaml(anchors + TASKS.replace(old, new.replace("BOMB", alias), 1))


@pytest.mark.parametrize("position", list(POSITIONS))
def test_an_alias_bomb_is_refused_at_once_naming_its_line(registry, write_yaml, cli_main, capsys, position):
    path = _bombed(write_yaml, position, levels=9)  # 9⁹ strings once expanded
    message = _error(registry, path)
    assert re.match(r".*tasks\.yaml:\d+: .* 1,000,000 YAML values once its aliases are expanded", message)
    assert cli_main(["run", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "relbench: error:" in err and "Traceback" not in err and len(err) < 400


@pytest.mark.parametrize("position", list(POSITIONS))
def test_a_message_quotes_at_most_200_characters_of_a_value(registry, write_yaml, position):
    message = _error(registry, _bombed(write_yaml, position, levels=5))  # under the limit: 66,430 values
    assert len(message) < 400 + QUOTE_LIMIT, message
    old, new = POSITIONS[position]
    long_value = write_yaml(TASKS.replace(old, new.replace("BOMB", "[" + "x" * 5000 + "]"), 1))
    assert "x" * (QUOTE_LIMIT + 1) not in _error(registry, long_value)


def test_short_repr_is_bounded_without_building_the_whole_repr():
    class Seq(list):
        pass

    bomb = Seq(["lol"] * 9)
    for _ in range(9):
        bomb = Seq([bomb] * 9)  # 9¹⁰ strings: its full repr would take gigabytes
    t0 = time.perf_counter()
    shown = short_repr({"key": bomb, "text": "y" * 10_000})
    assert time.perf_counter() - t0 < 0.1 and len(shown) <= QUOTE_LIMIT and shown.startswith("{")


@pytest.mark.parametrize("value, message", [
    ("[" * 900 + "]" * 900, "nested more than 64 levels"),
    ("&loop [*loop]", "contains the alias itself"),
    ("[2024-13-45]", "cannot read this value"),
    ("[" + "9" * 5000 + "]", "cannot read this value"),
])
def test_yaml_that_cannot_be_built_is_refused_with_its_line(registry, write_yaml, value, message):
    assert re.search(rf"tasks\.yaml:1\b.*{message}", _error(registry, write_yaml(f"x-value: {value}\n" + TASKS)))


def test_60000_tasks_are_refused_before_they_are_parsed(registry, tmp_path):
    head, task = TASKS.split("tasks:\n")
    path = tmp_path / "tasks.yaml"
    path.write_text(head + "tasks:\n" + "".join(task.replace("name: blobs", f"name: blobs-{i}") for i in range(60_000)))
    assert path.stat().st_size > 20 * 2**20
    assert re.search(r"tasks\.yaml: the tasks file takes the suite past 1 MiB", _error(registry, path))


def test_the_size_limit_counts_included_files_too(registry, write_yaml):
    filler = "# " + "x" * 1000 + "\n"
    write_yaml(filler * 600, "half.yaml")
    path = write_yaml(filler * 600 + TASKS + "include: [half.yaml]\n")
    assert re.search(r"tasks\.yaml:614: at `include\[0\]`: included file .*half\.yaml takes the suite past 1 MiB",
                     _error(registry, path))


def test_more_than_10000_tasks_are_refused_before_they_are_validated(registry, write_yaml):
    head, task = TASKS.split("tasks:\n")
    anchor = "x-task: &task\n" + task.replace("  - name:", "    name:", 1)
    path = write_yaml(head + anchor + "tasks: [" + ", ".join(["*task"] * 10_001) + "]\n")
    assert "more than 10,000 tasks" in _error(registry, path)


def _include_chain(folder: Path, files: int) -> Path:
    for i in range(files - 1):
        (folder / f"chain-{i}.yaml").write_text(f"include: [chain-{i + 1}.yaml]\n")
    (folder / f"chain-{files - 1}.yaml").write_text(TASKS.split("\n", 1)[1])
    return folder / "chain-0.yaml"


def test_a_3000_file_include_chain_is_refused_at_the_33rd_file(registry, tmp_path):
    (tmp_path / "longest").mkdir()
    assert [t.name for t in load_suite(_include_chain(tmp_path / "longest", 32), registry).tasks] == ["blobs"]
    message = _error(registry, _include_chain(tmp_path, 3000))
    assert re.search(r"chain-31\.yaml:1: at `include\[0\]`: includes are nested more than 32 files deep", message)


@pytest.mark.parametrize("edit, where", [
    (("seeds: [0]", "seeds: [0, 0]"), r"tasks\.yaml:1: at `suite\.seeds\[1\]`: seed 0 is listed twice"),
    (("    description:", "    seeds: [3, 1, 3]\n    description:"),
     r"tasks\.yaml:4: at `tasks\[0\]\.seeds\[2\]`: seed 3 is listed twice"),
    (("classes: 4}", "classes: 4, seed: -1}"), r"tasks\.yaml:5: at `tasks\[0\]\.dataset\.params\.seed`: .* got -1"),
    (("{seed: 2}", "{seed: 4294967296}"), r"tasks\.yaml:8: at `tasks\[0\]\.encoders\[1\]\.params\.seed`"),
])
def test_seeds_that_would_fail_every_unit_are_refused_at_validation(registry, write_yaml, cli_main, capsys, edit,
                                                                    where):
    path = write_yaml(TASKS.replace(*edit))
    assert re.search(where, _error(registry, path))
    assert cli_main(["run", str(path), "--dry-run"]) == 2 and "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("other, content", [
    ("secret.txt", "SECRET-TOKEN-0123456789 is the key to everything, keep it safe"),
    ("list.yaml", "[SECRET-TOKEN-0123456789, b, c]"),
    ("/etc/passwd", None),
])
def test_including_a_file_that_is_not_a_tasks_file_quotes_none_of_it(registry, write_yaml, other, content):
    if content is None and not Path(other).is_file():
        pytest.skip(f"{other} does not exist here")
    if content is not None:
        write_yaml(content, other)
    message = _error(registry, write_yaml(TASKS + f"include: [{other}]\n"))
    assert "is this a tasks file?" in message
    assert "SECRET" not in message and "root:" not in message


def test_a_named_pipe_is_not_a_regular_file_and_is_never_waited_on(registry, write_yaml, tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    assert "pipe.yaml: the tasks file is a named pipe (FIFO), not a regular file" in _error(registry,
                                                                                        tmp_path / "pipe.yaml")
    message = _error(registry, write_yaml(TASKS + "include: [pipe.yaml]\n"))
    assert re.search(r"tasks\.yaml:14: .*included file .*pipe\.yaml is a named pipe \(FIFO\), not a regular file",
                     message)


@pytest.mark.parametrize("name", ["readme", "README", "Index", "figures", "sources", "bad name!", "x" * 65, "--"])
def test_the_suggested_task_name_is_allowed_and_never_the_refused_one(registry, write_yaml, name):
    message = _error(registry, write_yaml(TASKS.replace("name: blobs", f"name: {name!r}")))
    suggested = re.search(r"E\.g\. '([^']*)'\.$", message).group(1)
    assert valid_task_name(suggested) and suggested.lower() != name.lower()


def test_an_include_given_as_one_path_includes_that_file(registry, write_yaml):
    write_yaml(TASKS.split("\n", 1)[1].replace("name: blobs", "name: more"), "more.yaml")
    suite = load_suite(write_yaml(TASKS + "include: more.yaml\n"), registry)
    assert [t.name for t in suite.tasks] == ["blobs", "more"]


def _labelled(name: str, n: int) -> str:
    return "[" + ", ".join(f"{{name: {name}, label: {name[0]}{i}}}" for i in range(n)) + "]"


@pytest.mark.parametrize("edits, said", [
    ([("suite: {seeds: [0]", "suite: {seeds: [" + ", ".join(map(str, range(20_001))) + "]")],
     "asks for up to 40,002 units of work"),
    ([("selectors: [random]", f"selectors: {_labelled('random', 100)}"),
      ("similarities: [cosine]", f"similarities: {_labelled('cosine', 150)}")],
     "asks for up to 30,000 units of work"),
])
def test_a_task_that_asks_for_too_many_units_is_refused_before_planning(registry, write_yaml, edits, said):
    text = TASKS
    for old, new in edits:
        text = text.replace(old, new)
    message = _error(registry, write_yaml(text))
    assert said in message and "split it into tasks over fewer" in message


def test_a_suite_that_asks_for_too_many_units_is_refused_at_the_task_that_crosses_the_limit(registry, write_yaml):
    head, task = TASKS.split("tasks:\n")
    seeds = "seeds: [" + ", ".join(map(str, range(5_000))) + "]\n    "
    many = "".join(task.replace("name: blobs", f"name: blobs-{i}").replace("description:", seeds + "description:")
                   for i in range(11))
    message = _error(registry, write_yaml(head + "tasks:\n" + many))
    assert "tasks[10]" in message and "more than 100,000 units of work" in message
