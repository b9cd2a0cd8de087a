"""BERT-base pretraining throughput on one CUDA GPU: length 128, bf16 autocast, the fused
attention kernel, the masked-LM head on masked positions only. Reports tokens per second
and model FLOPs utilisation (MFU) against the GPU's datasheet peak.

    python benchmarks/gpu_bert_base.py                 # batch 128, 20 timed steps
    python benchmarks/gpu_bert_base.py --compile       # the same under torch.compile

Without a CUDA device it says so and exits with status 2: there is nothing to measure.
"""

import argparse
import json
import statistics
import sys
import time

import torch
from pretraining_step import masked_batch  # this folder's CPU benchmark: the same batch

from bertbook.measure import datasheet_peak_flops, training_flops_per_token
from bertlib.batch import IGNORE_INDEX
from bertlib.config import BertConfig
from bertlib.pretraining import BertForPreTraining

SEQ = 128


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device here: this script measures a GPU (run it on Colab or a GPU box)")
        return 2
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    config = BertConfig.preset("bert-base")
    model = BertForPreTraining(config).to(device).train()
    step_model = torch.compile(model) if args.compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    batch = {name: tensor.to(device)
             for name, tensor in masked_batch(args.batch, SEQ, config.vocab_size).items()}

    def step() -> float:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())  # waits for the GPU

    for _ in range(args.warmup):
        step()
    torch.cuda.reset_peak_memory_stats()
    seconds = []
    for _ in range(args.steps):
        started = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - started)
    tokens_per_second = args.batch * SEQ / statistics.median(seconds)
    predicted = float((batch["labels"] != IGNORE_INDEX).float().mean())
    achieved = tokens_per_second * training_flops_per_token(config, SEQ, predicted)
    peak = datasheet_peak_flops(device)
    result = {"gpu": torch.cuda.get_device_name(device), "torch": torch.__version__,
              "batch": args.batch, "seq": SEQ, "compile": args.compile,
              "tokens_per_second": round(tokens_per_second),
              "achieved_tflops": round(achieved / 1e12, 1),
              "datasheet_tflops": None if peak is None else peak / 1e12,
              "mfu": None if peak is None else round(achieved / peak, 3),
              "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1),
              "median_step_s": round(statistics.median(seconds), 4)}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
