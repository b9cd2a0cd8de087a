"""Write environment.yml from the two pyproject.toml files (bertlib's and bertbook's), so they
can never disagree.

    python tools/authoring/environment.py          # rewrite environment.yml
"""

import sys
from pathlib import Path

import yaml

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.chapters import ROOT, tomllib

HEADER = """\
# conda env create -f environment.yml && conda activate bert-end-to-end
# Generated from the pyproject.toml files by `python tools/authoring/environment.py`; tested.
# The extra index lets pip find a CPU build of torch; on a CUDA machine remove that line.
"""


def environment() -> dict:
    library = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    book = tomllib.loads((ROOT / "bertbook" / "pyproject.toml").read_text())["project"]
    extras = book["optional-dependencies"]
    book_needs = [name for name in book["dependencies"] if name != "bertlib"]
    requirements = (library["dependencies"] + book_needs + extras["book"] + extras["dev"]
                    + extras["instructor"])
    pip = ["--extra-index-url https://download.pytorch.org/whl/cpu", *requirements, "-e .",
           "-e ./bertbook"]
    return {"name": "bert-end-to-end", "channels": ["conda-forge"],
            "dependencies": ["python=3.11", "pip", {"pip": pip}]}


if __name__ == "__main__":
    text = HEADER + yaml.safe_dump(environment(), sort_keys=False)
    (ROOT / "environment.yml").write_text(text)
    print("wrote environment.yml")
