"""An onnxruntime backend for the torch encoders: the encoder's torch module exported once
with ``torch.onnx`` (dynamic batch and sequence axes), checked against the torch forward
on real inputs, and cached on disk with the verdict of that check.

The graph is stored as ``<cache>/onnx/<model>-<key>.onnx``; ``<key>`` hashes what the
graph is made of: the model name, its weights fingerprint, the library that defines the
module (timm, transformers) and its version, the input shapes and output names, and the
torch and onnx versions, the opset and this module's own export version. Beside it,
``<model>-<key>.json`` records the verdict of the agreement check, valid for that graph
file (its sha256) and the onnxruntime version it was checked with; a graph or runtime that
changes is checked again. Export failures are recorded there too, so that a model the
exporter cannot handle is not exported again on every run.

**Agreement criterion.** On a probe of real inputs (up to four items, and one of them
alone, so that both a batch and a single item pass through the dynamic axes), the encoder's
final embeddings computed through onnxruntime must satisfy
``max |e_onnxruntime − e_torch| ≤ 1e-4 · max |e_torch|`` (largest absolute difference over
every probe embedding and dimension, relative to the largest absolute value of the torch
embeddings). Otherwise, or when export fails, the encoder runs its torch forward and says
why once (a logged warning).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relbench.api import atomic_write_bytes, deferred_import
from relbench_encoders._common import file_sha256, params_hash, require

torch = deferred_import("torch")

log = logging.getLogger(__name__)

#: the values of an encoder's ``backend`` parameter
BACKENDS = ("auto", "torch", "onnxruntime")
#: ONNX opset of the exported graphs
OPSET = 17
#: relative tolerance of the agreement check (see the module docstring)
TOLERANCE = 1e-4
#: bumped when a change of the export code changes the graphs it writes
EXPORT_VERSION = 1
#: how many items the agreement check embeds both ways
PROBE_SIZE = 4

#: graph files whose fallback was already reported by this process
_REPORTED: set[Path] = set()


def check_backend(backend: str) -> None:
    """Raise ValueError unless ``backend`` is one of :data:`BACKENDS`."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be auto, torch or onnxruntime, got {backend!r}")


def without_backend(params: dict[str, Any]) -> dict[str, Any]:
    """An encoder's parameters less ``backend``: the backend changes the embeddings no more
    than the device does (≤ 1e-4 relative, checked), so it is no part of their identity."""
    return {k: v for k, v in params.items() if k != "backend"}


def wanted(backend: str, device: torch.device) -> str:
    """The backend to try for ``backend`` on ``device``: ``auto`` is onnxruntime on the CPU
    when onnx and onnxruntime are installed (never slower there than torch's eager
    forward, twice as fast for the packaged CNNs), and torch elsewhere."""
    check_backend(backend)
    if backend != "auto":
        return backend
    installed = all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))
    return "onnxruntime" if device.type == "cpu" and installed else "torch"


def torch_arithmetic(backend: str, ctx: EncoderContext) -> str:
    """The arithmetic of a torch encoder (:meth:`~relbench.api.Encoder.arithmetic`):
    ``bf16`` (its forward under bfloat16 autocast, about 15× fp32's matrix throughput on a
    recent GPU) only when the task runs at bf16 and the forward is torch's on CUDA; fp32
    otherwise, and always at an fp32 task, whose banks are the CPU's arithmetic."""
    if ctx.precision != "bf16":
        return "fp32"
    device = ctx.device
    return "bf16" if device.type == "cuda" and wanted(backend, device) == "torch" else "fp32"


def require_runtime(what: str) -> None:
    """Raise :class:`~relbench.errors.MissingAsset` (with the pip command) unless onnx and
    onnxruntime are installed."""
    require("onnx", what)
    require("onnxruntime", what)


def probe_items(items: Sequence[Any]) -> list[Any]:
    """The items the agreement check embeds: the first :data:`PROBE_SIZE` (at least two,
    repeating the first when there is only one, so that the batch axis varies)."""
    head = list(items[:PROBE_SIZE])
    return head if len(head) > 1 else head * 2


@dataclass
class GraphSpec:
    """What one exported graph is.

    ``what`` names the encoder in messages; ``identity`` is what the graph is made of
    besides its inputs and outputs (model name, weights fingerprint, defining library and
    version, input resolution …). ``dynamic_axes`` maps input and output names to their
    dynamic axes, as ``torch.onnx.export`` takes them.
    """

    what: str
    model: str
    identity: dict[str, Any]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: dict[str, dict[int, str]] = field(default_factory=dict)

    def key(self) -> str:
        """A hash of everything the exported graph depends on."""
        onnx = require("onnx", "the onnxruntime backend")
        return params_hash({**self.identity, "inputs": self.input_names, "outputs": self.output_names,
                            "axes": self.dynamic_axes, "torch": torch.__version__, "onnx": onnx.__version__,
                            "opset": OPSET, "export": EXPORT_VERSION})

    def stem(self, folder: Path) -> Path:
        """``folder/<model>-<key>`` (the model name reduced to a safe file name)."""
        name = Path(self.model.rstrip("/\\")).name or "model"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64]
        return folder / f"{safe}-{self.key()}"


def release_freed_memory() -> bool:
    """Return the heap's free pages to the system (glibc's ``malloc_trim(0)``); True where
    glibc did so, False elsewhere (a no-op).

    :class:`OrtForward` calls it after every run. glibc raises its mmap threshold each
    time a mapped block is freed (up to 32 MiB), after which input batches (12.6 MB for 64
    images at 128²) come from the heap; with onnxruntime's threads allocating beside them,
    that heap was never trimmed: encoding 10,000 Fashion-MNIST images grew a process by
    about a batch per call, 0.5 → 2.4 GB (tf_efficientnet_lite0, AMD EPYC). Fixing the
    threshold instead (``mallopt``) kept it at 0.5 GB but slowed every later training
    loop of the process by a quarter (a fresh mapping for each large temporary), so the
    heap is trimmed where it grows, and glibc's policy is left alone."""
    trim = _malloc_trim()
    return trim is not None and trim(0) in (0, 1)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, looked up once (finding the C library runs ``ldconfig``);
    None off glibc."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def open_session(path: Path, device: torch.device, purpose: str = "the onnxruntime backend"):
    """An onnxruntime session on the graph at ``path`` as relbench runs every graph: the
    CPU memory arena off (memory is returned after each run instead of being kept at its
    peak size), intra-op threads following ``torch.get_num_threads()`` (one in a ``-j``
    worker: onnxruntime's default, a thread per core, would make the workers' spinning
    thread pools fight over the same cores), one inter-op thread, errors-only logging,
    and the CUDA provider when ``device`` is CUDA and the provider is installed."""
    ort = require("onnxruntime", purpose)
    options = ort.SessionOptions()
    options.enable_cpu_mem_arena = False
    options.intra_op_num_threads = max(1, torch.get_num_threads())
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: its warnings are about graph fusions
    providers = ["CPUExecutionProvider"]
    if device.type == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    return ort.InferenceSession(str(path), options, providers=providers)


class OrtForward:
    """An onnxruntime session that stands in for a torch module's forward: takes the
    inputs named by ``input_names`` as tensors (positional, in that order; those the
    exporter found unused are dropped) and returns the graph's outputs as CPU float32
    tensors.

    The session is :func:`open_session`'s.
    """

    def __init__(self, path: Path, device: torch.device, input_names: Sequence[str]):
        self.session = open_session(path, device)
        self.input_names = tuple(input_names)
        self._used = {i.name for i in self.session.get_inputs()}

    def __call__(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        feed = {name: x.detach().cpu().contiguous().numpy()
                for name, x in zip(self.input_names, inputs) if name in self._used}
        outputs = [torch.from_numpy(y).float() for y in self.session.run(None, feed)]
        del feed
        release_freed_memory()  # the input batch's pages go back (see the function)
        return outputs


class _Refused(Exception):
    """Why the graph is not used (said once, then the torch forward runs)."""


def prepare(
    spec: GraphSpec,
    module: torch.nn.Module,
    probes: Sequence[tuple[torch.Tensor, ...]],
    finish: Callable[[Sequence[torch.Tensor], tuple[torch.Tensor, ...]], torch.Tensor],
    folder: Path,
    device: torch.device,
) -> OrtForward | None:
    """An onnxruntime forward of ``module`` that agrees with it, or None (torch then runs).

    ``module`` (in eval mode) takes the inputs named by ``spec`` positionally and returns
    the tuple of its outputs; ``probes`` are input tuples built from real items, the first
    also serving as the export example; ``finish(outputs, inputs)`` turns a forward's CPU
    float32 outputs into the encoder's embeddings (pooling …), which the check compares. The
    graph and the check's verdict are cached in ``folder`` (see the module docstring): a
    graph with a verdict is opened without running torch. An error raised by the torch
    forward itself propagates.
    """
    stem = spec.stem(folder)
    graph, record_path = stem.with_suffix(".onnx"), stem.with_suffix(".json")
    try:
        forward = _cached(spec, graph, record_path, device)
        if forward is None:
            with torch.inference_mode(False), torch.no_grad():
                probes = [tuple(x.clone() for x in probe) for probe in probes]  # normal tensors: tracing needs them
                reference = [finish([y.float().cpu() for y in module(*(x.to(device) for x in probe))], probe)
                             for probe in probes]
            forward, digest = _graph(spec, module, probes[0], graph, record_path, device)
            record = _check(forward, probes, reference, finish, digest)
            _write(record_path, record)
            if not record["agrees"]:
                raise _Refused(record["reason"])
        return forward
    except _Refused as exc:
        if graph not in _REPORTED:
            _REPORTED.add(graph)
            log.warning("%s: the onnxruntime backend is not used (%s); running the torch forward instead",
                        spec.what, exc)
        return None


def _cached(spec: GraphSpec, graph: Path, record_path: Path, device: torch.device) -> OrtForward | None:
    """The session on a cached graph whose recorded verdict is valid and positive; None
    when the graph must be exported or checked; :class:`_Refused` when the record says
    that export or the check failed."""
    record = _read(record_path)
    if record.get("export_error") and not graph.is_file():
        raise _Refused(f"{record['export_error']}; recorded in {record_path}, delete it to try again")
    if not graph.is_file() or not _valid(record, file_sha256(graph, graph.parent / "hashes")):
        return None
    if not record["agrees"]:
        raise _Refused(record["reason"])
    try:
        return OrtForward(graph, device, spec.input_names)
    except Exception:  # noqa: BLE001 - a damaged graph file is exported and checked again
        return None


def _graph(spec: GraphSpec, module: torch.nn.Module, example: tuple[torch.Tensor, ...], graph: Path,
           record_path: Path, device: torch.device) -> tuple[OrtForward, str]:
    """The session on the cached graph (exported first when absent or unloadable), and
    the graph's sha256."""
    if graph.is_file():
        try:
            return OrtForward(graph, device, spec.input_names), file_sha256(graph, graph.parent / "hashes")
        except Exception:  # noqa: BLE001 - a damaged graph file is exported again
            pass
    data = _export(spec, module, example, record_path)
    try:
        atomic_write_bytes(graph, data)
    except OSError as exc:
        raise _Refused(f"could not write {graph}: {exc}") from exc
    try:
        forward = OrtForward(graph, device, spec.input_names)
    except Exception as exc:  # noqa: BLE001 - the runtime refuses the graph
        _write(record_path, {"export_error": f"onnxruntime could not load the exported graph: {_first_line(exc)}"})
        raise _Refused(f"onnxruntime could not load the exported graph: {_first_line(exc)}") from exc
    return forward, file_sha256(graph, graph.parent / "hashes")


def _export(spec: GraphSpec, module: torch.nn.Module, example: tuple[torch.Tensor, ...], record_path: Path) -> bytes:
    """The ONNX graph of ``module`` traced on ``example`` (the TorchScript-based exporter:
    the dynamo exporter needs onnxscript); a failure is recorded and refused."""
    buffer = io.BytesIO()
    device = next(module.parameters()).device
    try:
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes on shapes: the agreement check judges the graph
            torch.onnx.export(module, tuple(x.to(device) for x in example), buffer, dynamo=False,
                              opset_version=OPSET, input_names=list(spec.input_names),
                              output_names=list(spec.output_names), dynamic_axes=spec.dynamic_axes)
    except Exception as exc:  # noqa: BLE001 - any exporter failure means: run torch
        _write(record_path, {"export_error": f"torch.onnx.export failed: {_first_line(exc)}"})
        raise _Refused(f"torch.onnx.export failed: {_first_line(exc)}") from exc
    finally:
        module.eval()  # the exporter restores the training flag of the top module only
    return buffer.getvalue()


def _check(forward: OrtForward, probes: Sequence[tuple[torch.Tensor, ...]], reference: Sequence[torch.Tensor],
           finish: Callable, digest: str) -> dict[str, Any]:
    """The verdict of the agreement check (see the module docstring) as a record."""
    ort_version = require("onnxruntime", "the onnxruntime backend").__version__
    base = {"graph_sha256": digest, "onnxruntime": ort_version, "tolerance": TOLERANCE}
    try:
        got = [finish(forward(*probe), probe) for probe in probes]
    except Exception as exc:  # noqa: BLE001 - the graph fails on a real input
        return {**base, "agrees": False, "reason": f"onnxruntime failed on the probe inputs: {_first_line(exc)}"}
    if any(g.shape != r.shape for g, r in zip(got, reference)):
        return {**base, "agrees": False, "reason": "the graph's embeddings have another shape than torch's"}
    diff = max(float((g - r).abs().max()) for g, r in zip(got, reference))
    scale = max(float(r.abs().max()) for r in reference)
    agrees = diff <= TOLERANCE * scale
    reason = "" if agrees else (f"its embeddings differ from torch's by up to {diff:.3g}, more than "
                                f"{TOLERANCE:g} × {scale:.3g} (the largest torch value)")
    return {**base, "agrees": agrees, "max_abs_diff": diff, "scale": scale, "reason": reason}


def _valid(record: dict[str, Any], digest: str) -> bool:
    """True when ``record`` is a verdict on this graph file under this onnxruntime."""
    ort_version = require("onnxruntime", "the onnxruntime backend").__version__
    return (record.get("graph_sha256") == digest and record.get("onnxruntime") == ort_version
            and isinstance(record.get("agrees"), bool))


def _read(path: Path) -> dict[str, Any]:
    """The JSON record at ``path`` ({} when absent or unreadable: the check runs again)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _write(path: Path, record: dict[str, Any]) -> None:
    """Store ``record`` atomically; a failed write only means the check runs again."""
    try:
        atomic_write_bytes(path, json.dumps(record, indent=1, sort_keys=True).encode())
    except OSError as exc:
        log.warning("could not record the onnxruntime check in %s (%s); it runs again next time", path, exc)


def _first_line(exc: BaseException) -> str:
    """A one-line description of ``exc``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
