"""A tiny masked-LM pretraining under torchrun, for tests/bertlib/test_distributed.py: its
masks come from each rank's collator and its dropout from each rank's RNG, so resuming it
exactly needs every rank's own state.

    python -m torch.distributed.run --nproc_per_node 2 tests/bertlib/helpers/ddp_pretrain.py \\
        --out DIR [--stop-after N] [--resume] [--accumulation N]

It also counts DDP's gradient exchanges (a communication hook), written to exchanges.json.
"""

import argparse
import json
import sys
from pathlib import Path

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from bertbook.corpora import lee_news
from bertbook.datasets import minilm_dir
from bertlib.core.config import BertConfig
from bertlib.pretraining.masking import PretrainingCollator
from bertlib.pretraining.models import BertForMaskedLM
from bertlib.pretraining.sentence_pairs import sentence_documents, sentence_pairs
from bertlib.runtime import seed_everything
from bertlib.tokenizer import BertTokenizer
from bertlib.training.distributed import DataParallelTrainer, start_process_group
from bertlib.training.trainer import TrainingConfig

STEPS = 4


class Stop(Exception):
    """Raised by the callback that plays a killed run."""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stop-after", type=int, default=0)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--accumulation", type=int, default=1)
    args = parser.parse_args()
    rank, _, device = start_process_group()
    seed_everything(rank)  # each rank its own dropout draws
    tokenizer = BertTokenizer.from_pretrained(minilm_dir(), max_length=32)
    articles = lee_news()[:40]
    documents = sentence_documents([a.paragraphs for a in articles],
                                   lambda s: tokenizer.encode(s).ids[1:-1])
    pairs = sentence_pairs(documents, max_seq_length=32, seed=0)
    model = BertForMaskedLM(BertConfig.preset("bert-tiny", vocab_size=tokenizer.vocab_size,
                                              max_position_embeddings=32))
    config = TrainingConfig(steps=STEPS, batch_size=8, learning_rate=1e-3, warmup_steps=1,
                            accumulation=args.accumulation, checkpoint_every=1,
                            progress=False)
    collator = PretrainingCollator(tokenizer, seed=rank, next_sentence=False)
    trainer = DataParallelTrainer(model, pairs, collator, config, device, output_dir=args.out)

    def stop(record: dict) -> None:
        if record["step"] == args.stop_after:
            raise Stop

    trainer.callbacks.append(stop)
    exchanges = [0]

    def counted_allreduce(process_group, bucket):
        exchanges[0] += 1
        return default_hooks.allreduce_hook(process_group, bucket)

    trainer.forward_model.register_comm_hook(None, counted_allreduce)
    try:
        state = trainer.train(resume=args.resume)
    except Stop:
        state = trainer.state
    if rank == 0:
        losses = {record["step"]: record["loss"] for record in state.history}
        name = "losses-resumed.json" if args.resume else "losses.json"
        (args.out / name).write_text(json.dumps(losses))
        (args.out / "exchanges.json").write_text(json.dumps(exchanges[0] / STEPS))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
