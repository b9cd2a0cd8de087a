"""The repository's set-up files agree with each other."""

import re

import yaml

from tools.chapters import ROOT, tomllib


def _requirement_names(requirements: list[str]) -> dict[str, str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower(): r.replace(" ", "")
            for r in requirements}


def test_environment_yml_pip_section_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + [dep for extra in ("book", "dev")
                                        for dep in project["optional-dependencies"][extra]]
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    listed = [line for line in pip_section if not line.startswith("-")]
    assert _requirement_names(listed) == _requirement_names(wanted)
    assert "-e ." in pip_section
    assert "python=3.11" in environment["dependencies"]


def test_torch_is_unpinned_above():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch>=2.4" in project["dependencies"]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make book" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^stage \"make test\" make test$", ci, re.M)  # timed, then run
