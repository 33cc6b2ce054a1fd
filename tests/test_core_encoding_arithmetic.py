"""How an encoder computes is part of its bank's identity where it is not fp32: a bank
encoded under bf16 autocast (a bf16 task's forward on a GPU) never feeds an fp32 task, and
an fp32 task on a GPU computes in fp32 (TF32 off). Before, the timm and transformers
encoders autocast to bf16 on every GPU whatever the task's precision, and the bank's key
did not say so: an fp32 row on a GPU read bf16 embeddings, and a cache shared between a
GPU and a CPU machine mixed the two."""

from __future__ import annotations

import pytest
import torch

import toy_plugins
from relbench.config import load_suite
from relbench.encoding import strict_fp32_on_gpu
from relbench.interfaces import EncoderContext
from relbench.runner import Runner
from relbench_encoders.ort_backend import torch_arithmetic
from relbench_encoders.text import TransformersEncoder
from relbench_encoders.timm_encoder import TimmEncoder


def _needs(registry, write_yaml):
    from test_core_runner import TASKS

    [run] = Runner(load_suite(write_yaml(TASKS), registry), registry, quiet=True).plans()
    return run.bank_needs()


def test_an_fp32_bank_keeps_its_identity_and_a_bf16_bank_gets_its_own(registry, write_yaml, monkeypatch):
    fp32 = _needs(registry, write_yaml)
    assert fp32 and all("arithmetic" not in need.identity for need in fp32)  # the keys of every existing cache
    monkeypatch.setattr(toy_plugins.Rotated, "arithmetic", lambda self, ctx: "bf16", raising=False)
    bf16 = _needs(registry, write_yaml)
    assert [need.identity["arithmetic"] for need in bf16] == ["bf16"] * len(fp32)
    assert not {need.key for need in bf16} & {need.key for need in fp32}
    assert [{k: v for k, v in need.identity.items() if k != "arithmetic"} for need in bf16] == [
        need.identity for need in fp32]


def _context(precision: str, device) -> EncoderContext:
    return EncoderContext(device, "image", None, None, None, precision=precision)


def _no_device():
    raise AssertionError("an fp32 task must not resolve the device to know its arithmetic")


@pytest.mark.parametrize("backend", ["auto", "torch", "onnxruntime"])
def test_an_fp32_task_encodes_in_fp32_without_looking_for_a_gpu(backend):
    assert torch_arithmetic(backend, _context("fp32", _no_device)) == "fp32"


@pytest.mark.parametrize(("backend", "device", "expected"), [
    ("auto", "cuda", "bf16"), ("torch", "cuda", "bf16"), ("onnxruntime", "cuda", "fp32"),
    ("auto", "cpu", "fp32"), ("torch", "cpu", "fp32"),
])
def test_a_bf16_task_autocasts_only_a_torch_forward_on_a_gpu(backend, device, expected):
    assert torch_arithmetic(backend, _context("bf16", torch.device(device))) == expected


def test_the_torch_encoders_declare_the_arithmetic_they_encode_with():
    gpu_bf16 = _context("bf16", torch.device("cuda"))
    for encoder in (TimmEncoder(model="mobilenetv2_100", weights="random"), TransformersEncoder()):
        assert encoder.arithmetic(gpu_bf16) == "bf16"
        assert encoder.arithmetic(_context("fp32", _no_device)) == "fp32"


def test_fp32_on_a_gpu_turns_tf32_off():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        strict_fp32_on_gpu()
        assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
