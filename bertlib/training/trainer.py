"""A small, readable trainer for BERT that is also a real one: AdamW without decay on
biases and LayerNorm, linear warm-up and decay (`bertlib.training.optimizer`), clipping,
accumulation, mixed precision (the policy in `bertlib.runtime`), evaluation, and
checkpoints that resume exactly: the data order and the masking seeds are functions of
(seed, epoch, batch), so a resumed run sees what an uninterrupted one would have.

How this file is made: written by hand (chapter 06 tells each part in prose).
"""

import contextlib
import math
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
from torch import nn

from bertlib.errors import CheckpointError, ConfigError, InputError, TrainingDiverged
from bertlib.files import write_atomically
from bertlib.runtime import autocast, best_device, resolve_precision
from bertlib.training.optimizer import parameter_groups, warmup_then_linear_decay

__all__ = [
    "TrainingConfig",
    "TrainingState",
    "Trainer",
]

FUSED_ADAMW_DEVICES = ("cpu", "cuda")  # where torch (>= 2.4) has a fused AdamW kernel


@dataclass
class StepSettings:
    """How each update is made, whatever decides how many there are: the batch, AdamW's
    settings, clipping, the precision and the seed of the data order. Pretraining counts
    its updates in steps (`TrainingConfig`), fine-tuning in epochs (`FineTuningRecipe`);
    both are these settings plus their own, so neither restates the other's knobs.
    Not in __all__: a user meets it only as the part both share."""

    batch_size: int = 32
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    precision: str = "auto"
    seed: int = 0
    progress: bool = True  # a bar on long work; the book's many short runs turn it off

    def __post_init__(self) -> None:
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ConfigError(f"batch_size must be a whole number of at least 1, not "
                              f"{self.batch_size!r}")
        if not 0 < self.learning_rate < math.inf:  # NaN fails this too
            raise ConfigError(f"learning_rate must be a positive number (BERT pretrains at "
                              f"1e-4 and fine-tunes at 2e-5 to 5e-5), not "
                              f"{self.learning_rate!r}")

    def step_settings(self) -> dict:
        """The shared settings by name, to hand from one kind of run to the other."""
        return {f.name: getattr(self, f.name) for f in fields(StepSettings)}


@dataclass(kw_only=True)
class TrainingConfig(StepSettings):
    """Everything a training run is told: its length in steps, the update's settings
    (`StepSettings`: batch, AdamW, clipping, precision, seed), warm-up, accumulation, how
    often to evaluate, checkpoint and log, and the loss above which the run is stopped as
    diverged."""

    steps: int
    warmup_steps: int = 0
    accumulation: int = 1
    eval_every: int = 0
    checkpoint_every: int = 0
    log_every: int = 10
    max_loss: float = 50.0
    loader_workers: int | None = None  # None: default_loader_workers(device)
    compile: bool = False  # torch.compile the forward and loss: a GPU's lever, minutes to build

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("steps", "accumulation", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.loader_workers is not None and self.loader_workers < 0:
            raise ConfigError("loader_workers must be 0 (build batches in this process) or more")
        if self.warmup_steps >= self.steps:
            raise ConfigError("warmup_steps must be smaller than steps")
        for name in ("eval_every", "checkpoint_every", "warmup_steps"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 (never) or more, not {getattr(self, name)}")


@dataclass
class TrainingState:
    """Where training stands: what a checkpoint needs besides the tensors."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    history: list = field(default_factory=list)
    evaluations: list = field(default_factory=list)


def adamw_and_schedule(model: nn.Module, config: TrainingConfig
                       ) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """The trainer's optimiser and learning-rate schedule for `model`: AdamW over the two
    parameter groups, warm-up then linear decay to 0 at `config.steps`. A function of its
    own so that a step written out by hand (chapters 06 and 07) updates as the trainer does.

    AdamW is fused (one kernel for every parameter's update, not several per tensor) where
    the model's weights live on a device torch has that kernel for. On a 2-core CPU it made
    MiniLM's update 6.9 times faster (79 against 11 ms; benchmarks/adamw_step.py); on a
    GPU it also lets the fp16 scaler hand over its overflow flag without a wait."""
    device_type = next(model.parameters()).device.type
    optimizer = torch.optim.AdamW(parameter_groups(model, config.weight_decay),
                                  lr=config.learning_rate, betas=tuple(config.adam_betas),
                                  eps=config.adam_eps, fused=device_type in FUSED_ADAMW_DEVICES)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_then_linear_decay(step, config.warmup_steps, config.steps))
    return optimizer, schedule


class SeededBatches(torch.utils.data.Dataset):
    """Micro-batch `index` of a run: this process's share of it, collated and masked.

    Epoch e's order is a permutation seeded by (seed, e), and the collator is reseeded by
    (epoch, batch, rank) before masking. So a loader's worker process, or a run resumed
    after a crash, builds exactly the batch an unbroken single-process run would have."""

    def __init__(self, dataset, collator, batch_size: int, seed: int, rank: int = 0,
                 world_size: int = 1):
        self.dataset, self.collator, self.seed = dataset, collator, seed
        self.batch_size, self.rank, self.world_size = batch_size, rank, world_size
        self.per_epoch = len(dataset) // batch_size  # the last partial batch is left out
        self._shuffled = (-1, torch.empty(0, dtype=torch.long))  # (epoch, its order)

    def place(self, index: int) -> tuple[int, int]:
        """(epoch, batch within the epoch) of micro-batch `index`."""
        return divmod(index, self.per_epoch)

    def epoch_order(self, epoch: int) -> torch.Tensor:
        """The dataset's order in `epoch`: reshuffled once per epoch, never per batch."""
        if self._shuffled[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
            self._shuffled = (epoch, torch.randperm(len(self.dataset), generator=generator))
        return self._shuffled[1]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        epoch, batch = self.place(index)
        share = self.batch_size // self.world_size  # this process's slice of the batch
        start = batch * self.batch_size + self.rank * share
        chosen = self.epoch_order(epoch)[start:start + share].tolist()
        self.collator.reseed(f"{epoch}/{batch}/{self.rank}")
        return self.collator([self.dataset[i] for i in chosen])


def without_full_attention_mask(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch without its attention mask where the mask is all ones (packed rows, no
    padding): it says nothing then, and without it scaled_dot_product_attention may take
    its flash kernel on a GPU, which accepts no mask. Checked on the host before the copy to
    the device, so it costs no wait for the device."""
    mask = batch.get("attention_mask")
    if mask is None or mask.device.type != "cpu" or not bool(mask.all()):
        return batch
    return {name: tensor for name, tensor in batch.items() if name != "attention_mask"}


def default_loader_workers(device: torch.device) -> int:
    """Worker processes that build batches ahead: none on a CPU, where they would take
    cores from the model's own matrix products; on a GPU one per core, up to 4 (a Colab GPU
    runtime has 2 cores)."""
    return 0 if device.type != "cuda" else min(4, os.cpu_count() or 1)


def batch_loader(batches: SeededBatches, first: int, stop: int, device: torch.device,
                 workers: int) -> torch.utils.data.DataLoader:
    """Serve micro-batches first..stop-1 in order, built by `workers` processes, in pinned
    memory on a GPU (so the copy to the device need not wait)."""
    return torch.utils.data.DataLoader(
        batches, batch_size=None, sampler=range(first, stop), num_workers=workers,
        pin_memory=device.type == "cuda", prefetch_factor=4 if workers else None,
        # Its own generator: by default a loader draws its workers' seed from the global
        # RNG that dropout uses, and a resumed run would then drop out other units.
        generator=torch.Generator())


def prepare_output_dir(folder: Path) -> None:
    """Before any training: the folder must be writable (found out now, not at the first
    checkpoint after the work), and the temporary files of checkpoint writes that were
    killed mid-way are removed."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ConfigError(f"cannot write in {folder} ({error.strerror}); choose a folder you "
                          "can write to") from None
    for stale in folder.glob("checkpoint.*.tmp"):
        stale.unlink(missing_ok=True)


class Trainer:
    """Pretrain (or fine-tune) a model whose forward returns an object with `.loss`."""

    def __init__(self, model: nn.Module, dataset, collator, config: TrainingConfig,
                 device: torch.device | None = None, output_dir: str | Path | None = None,
                 evaluate=None, callbacks=()):
        self.model, self.dataset, self.collator, self.config = model, dataset, collator, config
        self.device = torch.device("cpu") if device is None else best_device(device)
        self.precision = resolve_precision(config.precision, self.device)
        self.output_dir = Path(output_dir) if output_dir else None
        if self.output_dir is not None:
            prepare_output_dir(self.output_dir)
        self.evaluate_fn, self.callbacks = evaluate, list(callbacks)
        if len(dataset) < config.batch_size:
            raise InputError(f"the dataset has {len(dataset)} examples, fewer than one batch "
                             f"({config.batch_size}); use more data or a smaller batch_size")
        if not callable(getattr(collator, "reseed", None)):
            raise ConfigError(f"{type(collator).__name__} has no reseed(key) method: the "
                              "trainer reseeds the collator before each batch so that resumed "
                              "runs and loader workers draw the same masks; add one (it may "
                              "do nothing if the collator draws nothing at random)")
        self.model.to(self.device)
        self.optimizer, self.scheduler = adamw_and_schedule(model, config)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.state = TrainingState()
        self.loader_workers = (default_loader_workers(self.device)
                               if config.loader_workers is None else config.loader_workers)
        # One process owns the whole batch; chapter 11's data-parallel trainer changes these
        # three: each of world_size processes takes its slice through its wrapped model.
        self.rank, self.world_size, self.forward_model = 0, 1, model
        self._compiled = False

    def _whole_batch(self, totals: torch.Tensor) -> torch.Tensor:
        """The step's [loss, tokens] over the whole global batch: here, this process's
        own (chapter 11 combines them over all processes)."""
        return totals

    def _gradient_sync(self, last: bool):
        """The context a micro-batch's forward and backward run in: here none (chapter
        10's data-parallel trainer exchanges gradients only after the last one)."""
        return contextlib.nullcontext()

    @property
    def checkpoint_path(self) -> Path | None:
        return self.output_dir / "checkpoint.pt" if self.output_dir else None

    def _divergence_advice(self, loss: float, step: int) -> str:
        saved = self.checkpoint_path is not None and self.checkpoint_path.is_file()
        where = (f"The last good checkpoint, {self.checkpoint_path}, is untouched; resume "
                 "from it with the changes below." if saved else "No checkpoint was written.")
        fixes = [f"lower the learning rate (now {self.config.learning_rate})",
                 f"lengthen the warm-up (now {self.config.warmup_steps} steps)"]
        if self.precision != "fp32":
            fixes.append(f"train in fp32 instead of {self.precision}")
        return f"the loss is {loss} at step {step}. {where} Try: " + \
            "; ".join(fixes) + "."

    def save_checkpoint(self) -> Path:
        """Write everything needed to continue, atomically (temporary file, then rename):
        a write that fails or is killed leaves the previous checkpoint as it was."""
        if self.checkpoint_path is None:
            raise ConfigError("this Trainer has no output_dir to save checkpoints in")
        self.output_dir.mkdir(parents=True, exist_ok=True)
        payload = {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "scaler": self.scaler.state_dict(),
            "state": asdict(self.state),
            "torch_rng": torch.get_rng_state(), "config": asdict(self.config),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "precision": self.precision,
        }
        write_atomically(self.checkpoint_path, lambda path: torch.save(payload, path),
                         CheckpointError)
        return self.checkpoint_path

    def load_checkpoint(self) -> None:
        """Restore a saved run; the next step is the one an unbroken run would take."""
        if self.checkpoint_path is None or not self.checkpoint_path.is_file():
            raise CheckpointError(f"no checkpoint to resume from at {self.checkpoint_path}; "
                                  "start without resume first")
        # Everything onto the CPU first: the RNG states must stay CPU tensors (set_rng_state
        # refuses others), and load_state_dict moves the rest to where the model lives.
        try:
            payload = torch.load(self.checkpoint_path, map_location="cpu",
                                 weights_only=False)  # our own file: it holds Python RNG states
        except Exception as error:  # zip, pickle and EOF errors alike: the file is damaged
            raise CheckpointError(f"{self.checkpoint_path} cannot be read ({type(error).__name__}"
                                  "); it is truncated or damaged, so the run cannot resume "
                                  "from it: start again in another folder") from None
        if payload["config"]["steps"] != self.config.steps:
            raise CheckpointError(f"the checkpoint was made for {payload['config']['steps']} "
                                  f"steps, this run asks for {self.config.steps}; the "
                                  "schedule would differ")
        saved_precision = payload.get("precision", self.precision)
        if saved_precision != self.precision:  # fp16's loss scale has no meaning in bf16
            raise CheckpointError(f"the checkpoint was trained in {saved_precision}, this run "
                                  f"resolves to {self.precision}; resume with "
                                  f"precision={saved_precision!r}")
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.scheduler.load_state_dict(payload["scheduler"])
        self.scaler.load_state_dict(payload["scaler"])
        self.state = TrainingState(**payload["state"])
        torch.set_rng_state(payload["torch_rng"].cpu())
        if payload["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([state.cpu() for state in payload["cuda_rng"]])

    def _train_step(self, batches) -> torch.Tensor:
        """One optimiser step over `accumulation` micro-batches from the iterator `batches`.
        Returns [loss, tokens, gradient norm] still on the device: `train` reads them back only
        when it logs, so the host can queue the next steps while the GPU works."""
        self.model.train()
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss, tokens
        for index in range(self.config.accumulation):
            on_host = next(batches)
            mask = on_host.get("attention_mask", torch.ones_like(on_host["input_ids"]))
            tokens = mask.sum().double().to(self.device, non_blocking=True)
            batch = {k: v.to(self.device, non_blocking=True)
                     for k, v in without_full_attention_mask(on_host).items()}
            with self._gradient_sync(last=index == self.config.accumulation - 1):
                with autocast(self.device, self.precision):
                    loss = self.forward_model(**batch).loss / self.config.accumulation
                self.scaler.scale(loss).backward()
            totals += torch.stack([loss.detach().double(), tokens])
        self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                   self.config.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        # The schedule follows the steps taken. Under fp16 the scaler skips an update whose
        # gradients overflowed (a few early on, while it finds its scale); asking whether it
        # did (get_scale) would stop the host until the GPU finished, every step.
        self.scheduler.step()
        self.state.step += 1
        return torch.cat([self._whole_batch(totals), grad_norm.double().reshape(1)])

    def _read_back(self, unread: list[tuple[int, float, torch.Tensor]]) -> list[dict]:
        """The records of the steps not yet read, with one wait for the device for them all.
        A diverged loss stops training here, before any checkpoint could save its weights."""
        numbers = torch.stack([values for _, _, values in unread]).tolist()
        records = []
        for (step, lr, _), (loss, tokens, grad_norm) in zip(unread, numbers):
            if not math.isfinite(loss) or loss > self.config.max_loss:
                self.state.history += records
                raise TrainingDiverged(self._divergence_advice(loss, step))
            records.append({"step": step, "loss": loss, "grad_norm": grad_norm, "lr": lr,
                            "tokens": int(tokens)})
        unread.clear()
        return records

    def train(self, resume: bool = False) -> TrainingState:
        """Train to config.steps (continuing from the checkpoint if resume); return the state.
        Numbers are read back from the device every `log_every` steps, and before an
        evaluation, a checkpoint or a callback (callbacks see every step, so they cost a wait)."""
        from tqdm import tqdm

        if resume:
            self.load_checkpoint()
        config = self.config
        if config.compile and not self._compiled:  # after any wrapping (chapter 11's DDP)
            self.forward_model, self._compiled = torch.compile(self.forward_model), True
        batches = SeededBatches(self.dataset, self.collator, config.batch_size, config.seed,
                                self.rank, self.world_size)
        loader = iter(batch_loader(batches, self.state.step * config.accumulation,
                                   config.steps * config.accumulation, self.device,
                                   self.loader_workers))
        bar = tqdm(total=config.steps, initial=self.state.step, disable=not config.progress,
                   desc="training", mininterval=10, file=sys.stdout)
        started, tokens_seen, unread, records = time.perf_counter(), 0, [], []
        with _SignalStop(saves=self.output_dir is not None) as stop:
            while self.state.step < config.steps:
                if stop.received:
                    bar.close()
                    self._stop_for(stop.received, unread)
                values = self._train_step(loader)
                step = self.state.step
                unread.append((step, self.scheduler.get_last_lr()[0], values))
                place = batches.place(step * config.accumulation)
                self.state.epoch, self.state.batch_in_epoch = place
                evaluate = config.eval_every and step % config.eval_every == 0 and self.evaluate_fn
                save = config.checkpoint_every and step % config.checkpoint_every == 0
                if evaluate or save or self.callbacks or step % config.log_every == 0 \
                        or step == config.steps:
                    records = self._read_back(unread)
                    self.state.history += records
                    tokens_seen += sum(record["tokens"] for record in records)
                    rate = tokens_seen / (time.perf_counter() - started)
                    bar.set_postfix(loss=f"{records[-1]['loss']:.3f}", tok_s=f"{rate:,.0f}",
                                    refresh=False)
                if evaluate:
                    scores = self.evaluate_fn(self.model)
                    self.state.evaluations.append({"step": step, **scores})
                if save:
                    self.save_checkpoint()
                for callback in self.callbacks:
                    callback(records[-1])
                bar.update(1)
        bar.close()
        return self.state

    def _stop_for(self, signal_name: str, unread: list) -> None:
        """A signal asked to stop: save where the run stands, say how to go on, and stop."""
        if unread:
            self.state.history += self._read_back(unread)
        if self.output_dir is None:
            raise KeyboardInterrupt(f"{signal_name} at step {self.state.step}: stopped; this "
                                    "trainer has no output_dir, so nothing was saved")
        path = self.save_checkpoint()
        print(f"{signal_name} at step {self.state.step}: saved {path}; train again with "
              "resume=True (or the command with --resume) to go on", file=sys.stderr)
        raise KeyboardInterrupt(f"stopped at step {self.state.step}; {path} holds the run")


class _SignalStop:
    """Ctrl-C (SIGINT) or SIGTERM while training: the first asks the loop to stop before
    its next step, with a checkpoint; a second stops at once. Signals reach Python's main
    thread only, so elsewhere nothing is changed."""

    def __init__(self, saves: bool):
        self.received: str | None = None
        self.previous: dict = {}
        self.saves = saves  # whether stopping writes a checkpoint (the trainer has a folder)

    def __enter__(self) -> "_SignalStop":
        if threading.current_thread() is threading.main_thread():
            self.previous = {sig: signal.signal(sig, self._handle)
                             for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _handle(self, number: int, frame) -> None:
        if self.received:
            raise KeyboardInterrupt(f"a second {self.received}: stopped at once")
        self.received = signal.Signals(number).name
        kept = ("with a checkpoint" if self.saves
                else "saving nothing: this run was given no output folder")
        print(f"\n{self.received}: stopping after this step, {kept} (again to stop at once)",
              file=sys.stderr)

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
