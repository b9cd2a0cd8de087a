"""The repository's set-up files agree with each other."""

import os
import re
import subprocess

import yaml

from tools.chapters import ROOT, tomllib


def _requirement_names(requirements: list[str]) -> dict[str, str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower(): r.replace(" ", "")
            for r in requirements}


def _project(folder=ROOT) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def test_environment_yml_pip_section_matches_pyproject():
    library, book = _project(), _project(ROOT / "bertbook")
    wanted = (library["dependencies"] + [d for d in book["dependencies"] if d != "bertlib"]
              + [dep for extra in ("book", "dev", "instructor")
                 for dep in book["optional-dependencies"][extra]])
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    listed = [line for line in pip_section if not line.startswith("-")]
    assert _requirement_names(listed) == _requirement_names(wanted)
    assert "-e ." in pip_section and "-e ./bertbook" in pip_section
    assert "python=3.11" in environment["dependencies"]


def test_torch_is_unpinned_above():
    assert "torch>=2.4" in _project()["dependencies"]


def test_the_library_needs_nothing_of_the_book():
    """`pip install bertlib` brings what BERT needs; the book's package brings the rest."""
    library, book = _project(), _project(ROOT / "bertbook")
    extras = library.get("optional-dependencies", {})
    assert set(extras) <= {"transformers", "peft", "onnx"}  # the clients, never the book
    assert not set(_requirement_names(library["dependencies"])) - {
        "torch", "numpy", "tqdm", "tokenizers", "safetensors"}
    assert "bertlib" in book["dependencies"]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make book" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^stage \"make test\" make test$", ci, re.M)  # timed, then run


def _torch_source(nvidia_smi: str, tmp_path, **extra_env: str) -> str:
    """What setup.sh would install torch from, with a fake nvidia-smi that prints this."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "nvidia-smi").write_text(f"#!/bin/sh\n{nvidia_smi}\n")
    (fake / "nvidia-smi").chmod(0o755)
    env = {name: value for name, value in os.environ.items() if name != "TORCH_INDEX"}
    env.update(PATH=f"{fake}{os.pathsep}{env['PATH']}", **extra_env)
    setup = ROOT / "tools" / "authoring" / "setup.sh"
    done = subprocess.run(["bash", str(setup), "--torch-source"],
                          env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_setup_installs_a_cuda_torch_where_an_nvidia_gpu_answers(tmp_path):
    gpu = "echo 'GPU 0: Tesla T4 (UUID: GPU-0)'"
    no_gpu = "echo 'NVIDIA-SMI has failed: no driver' >&2; exit 9"
    assert _torch_source(gpu, tmp_path) == "cuda pypi"
    assert _torch_source(no_gpu, tmp_path) == "cpu https://download.pytorch.org/whl/cpu"
    index = "https://download.pytorch.org/whl/cu124"
    assert _torch_source(gpu, tmp_path, TORCH_INDEX=index) == f"index {index}"


def test_colab_installs_only_what_its_runtime_lacks():
    """Colab has torch (a CUDA build), Jupyter and most of the stack; upgrading them into its
    runtime breaks it. Each chapter's first cell installs bertlib and bertbook[colab]."""
    from tools.authoring.sync import colab_cell

    extras = _project(ROOT / "bertbook")["optional-dependencies"]
    colab = set(_requirement_names(extras["colab"]))
    assert "datasets" in colab  # the gpu size's corpora and benchmarks
    assert not colab & {"torch", "jupyterlab", "ipykernel", "jupyter-book", "jupytext"}
    cell = colab_cell()
    assert 'SOURCE = f"git+{REPO}@' in cell and 'f"bertlib @ {SOURCE}"' in cell
    assert 'f"bertbook[colab] @ {SOURCE}#subdirectory=bertbook"' in cell
