"""Serving on a CPU, for chapter 10's last section and benchmarks/serving.py: the fused and
int8 files onnxruntime runs, and a session configured as a server sharing its cores."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path

import torch

__all__ = ["missing_packages", "fused_onnx", "int8_onnx", "cpu_session", "serving_times"]


def missing_packages() -> str:
    """What serving needs and this Python lacks ("" when nothing): onnx and onnxruntime are
    an extra of bertlib (`pip install "bertlib[onnx]"`), not a requirement."""
    return ", ".join(name for name in ("onnx", "onnxruntime")
                     if importlib.util.find_spec(name) is None)


def fused_onnx(model: torch.nn.Module, folder: Path) -> Path:
    """bertlib.serving.export_onnx, then onnxruntime's BERT optimiser: the fused file."""
    from bertlib.serving import export_onnx

    plain = export_onnx(model, folder / "classifier.onnx")
    return optimized(plain, model.config)


def optimized(path: Path, config) -> Path:
    """The file onnxruntime's BERT optimiser makes of an export: fused kernels."""
    from onnxruntime.transformers.optimizer import optimize_model

    fused = optimize_model(str(path), model_type="bert", num_heads=config.num_attention_heads,
                           hidden_size=config.hidden_size)
    target = path.with_name(path.stem + "-fused.onnx")
    fused.save_model_to_file(str(target))
    return target


def int8_onnx(fused: Path) -> Path:
    """onnxruntime's dynamic int8 quantisation of a fused file: weights stored as 8-bit
    integers, activations quantised on the fly, products in int8. A scale per output
    channel (not one per matrix) and a 7-bit range for weights (which CPUs without VNNI
    need against overflow): on benchmarks/serving.py's model the per-matrix default lost
    2.0 points of dev accuracy, these settings 0.2, at nearly the same speed."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = fused.with_name(fused.stem + "-int8.onnx")
    # The fused operators are onnxruntime's own, which ONNX's shape inference cannot type:
    # their outputs are float32, said outright.
    with _without_preprocessing_advice():
        quantize_dynamic(str(fused), str(target), weight_type=QuantType.QInt8,
                         per_channel=True, reduce_range=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return target


@contextlib.contextmanager
def _without_preprocessing_advice() -> Iterator[None]:
    """quantize_dynamic logs a warning to run its pre-processing (shape inference) first.
    That pre-processing cannot type the fused operators either, which is why the types are
    given above, so the advice does not apply; left in, it lands in chapter 10's saved
    outputs as stderr. Only that one message is dropped, and only during the call."""
    def keep(record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()

    logger = logging.getLogger()
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def cpu_session(path: Path, threads: int):
    """An onnxruntime session as a server sharing its cores would run it: `threads` threads
    that do not spin-wait between calls (by default they do, taking the cores that other
    work, torch included, runs on next)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def serving_times(model: torch.nn.Module, input_ids: torch.Tensor, repeats: int
                  ) -> dict[str, float]:
    """Milliseconds per call of eager torch, the fused export and its int8 version on one
    batch of `input_ids` (no padding), interleaved, as many threads for each: chapter 10's
    serving table. The files live only while their sessions are made."""
    import tempfile

    from bertbook.measure import interleaved_timings, medians

    request = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
               "token_type_ids": torch.zeros_like(input_ids)}
    feed = {name: tensor.numpy() for name, tensor in request.items()}
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as folder:  # each session reads its file at once
        fused_file = fused_onnx(model, Path(folder))
        sessions = {"fused": cpu_session(fused_file, threads),
                    "fused int8": cpu_session(int8_onnx(fused_file), threads)}
    steps = {"eager torch": lambda: model(**request).logits}
    steps |= {name: (lambda s=s: s.run(None, feed)) for name, s in sessions.items()}
    with torch.no_grad():
        seconds = medians(interleaved_timings(steps, repeats=repeats))
    return {name: value * 1000 for name, value in seconds.items()}
