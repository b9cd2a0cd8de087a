"""BERT-base pretraining throughput on one CUDA GPU: length 128, the library's precision
policy (bf16 on compute capability 8.0 and newer, fp16 with loss scaling on older GPUs such
as the T4), the masked-LM head on masked positions only. Reports tokens per second, model
FLOPs utilisation (MFU) against the GPU's datasheet peak, and which attention kernel ran.

The batch has no padding, so it is given no attention mask: on a GPU a mask, even one of
all ones, keeps PyTorch from choosing the flash-attention kernel, which takes none.

    python benchmarks/gpu_bert_base.py                 # batch 128, 20 timed steps
    python benchmarks/gpu_bert_base.py --compile       # the same under torch.compile

Without a CUDA device it says so and exits with status 2: there is nothing to measure.
"""

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

import torch
from pretraining_step import masked_batch  # this folder's CPU benchmark: the same batch
from torch.profiler import ProfilerActivity, profile

from bertbook.measure import datasheet_peak_flops, training_flops_per_token, training_step
from bertlib.batch import IGNORE_INDEX
from bertlib.core.config import BertConfig
from bertlib.pretraining.models import BertForPreTraining
from bertlib.runtime import resolve_precision

MAX_SEQ_LENGTH = 128
SDPA_KERNELS = {  # profiler operator names -> the kernel's usual name
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "memory-efficient",
    "_scaled_dot_product_cudnn_attention": "cuDNN",
    "_scaled_dot_product_attention_math": "math (unfused)",
}


def attention_kernels(run: Callable[[], object]) -> list[str]:
    """Which scaled-dot-product-attention kernels one call of `run` used, by the operator
    names PyTorch's profiler records."""
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as profiler:
        run()
    names = {event.key for event in profiler.key_averages()}
    return sorted({kernel for operator, kernel in SDPA_KERNELS.items()
                   if any(operator in name for name in names)})


def unpadded(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch without its all-ones attention mask (see the module's docstring)."""
    if not bool(batch["attention_mask"].all()):
        raise ValueError("this batch has padding: it needs its attention mask")
    return {name: tensor for name, tensor in batch.items() if name != "attention_mask"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--untimed-steps", type=int, default=5)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device here: this script measures a GPU (run it on Colab or a GPU box)")
        return 2
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    precision = resolve_precision("auto", device)
    config = BertConfig.preset("bert-base")
    model = BertForPreTraining(config).to(device)
    step_model = torch.compile(model) if args.compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    batch = unpadded({name: tensor.to(device) for name, tensor
                      in masked_batch(args.batch_size, MAX_SEQ_LENGTH, config.vocab_size).items()})
    step = training_step(step_model, batch, precision, optimizer=optimizer)
    for _ in range(args.untimed_steps):
        step()
    kernels = attention_kernels(step)
    torch.cuda.reset_peak_memory_stats()
    seconds = []
    for _ in range(args.steps):
        started = time.perf_counter()
        step()  # returns the loss as a float, so it waits for the GPU
        seconds.append(time.perf_counter() - started)
    tokens_per_second = args.batch_size * MAX_SEQ_LENGTH / statistics.median(seconds)
    predicted = float((batch["labels"] != IGNORE_INDEX).float().mean())
    achieved = tokens_per_second * training_flops_per_token(config, MAX_SEQ_LENGTH, predicted)
    peak = datasheet_peak_flops(device)
    result = {"gpu": torch.cuda.get_device_name(device), "torch": torch.__version__,
              "compute_capability": list(torch.cuda.get_device_capability(device)),
              "precision": precision, "attention_kernels": kernels,
              "batch_size": args.batch_size, "max_seq_length": MAX_SEQ_LENGTH,
              "compile": args.compile,
              "tokens_per_second": round(tokens_per_second),
              "achieved_tflops": round(achieved / 1e12, 1),
              "datasheet_tflops": None if peak is None else peak / 1e12,
              "mfu": None if peak is None else round(achieved / peak, 3),
              "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1),
              "median_step_s": round(statistics.median(seconds), 4)}
    print(f"precision {precision}, attention kernel(s): {', '.join(kernels) or 'none found'}")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
