"""A fixed thread count holds for every pool that sums: torch's and NumPy's BLAS."""

import os

import numpy as np
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from relbench.threads import THREAD_VARIABLES, fixed_threads, thread_variables


def _blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def _leading_correlations(X: np.ndarray, Y: np.ndarray) -> float:
    """SVCCA's sums: two SVDs and the singular values of the bases' product (LAPACK, BLAS)."""
    U = np.linalg.svd(X - X.mean(0), full_matrices=False)[0][:, :10]
    V = np.linalg.svd(Y - Y.mean(0), full_matrices=False)[0][:, :10]
    return float(np.linalg.svd(U.T @ V, compute_uv=False).sum())


def test_a_fixed_count_holds_for_numpys_blas_and_is_restored_after():
    # the defect: rows computed by -j workers (started with OMP_NUM_THREADS=1, so OpenBLAS
    # at one thread) were recomputed by `relbench verify` with torch at one thread but
    # OpenBLAS at one per core, and an SVCCA unit came out 1e-16 apart from its release
    np.ones(4) @ np.ones(4)  # NumPy's BLAS loaded
    saved, outside = {var: os.environ.get(var) for var in THREAD_VARIABLES}, torch.get_num_threads()
    with threadpool_limits(2):
        before, torch_before = _blas_threads(), torch.get_num_threads()
        with fixed_threads(1):
            assert _blas_threads() == {1} and torch.get_num_threads() == 1
            assert all(os.environ[var] == "1" for var in THREAD_VARIABLES)
        assert _blas_threads() == before and torch.get_num_threads() == torch_before
    assert {var: os.environ.get(var) for var in THREAD_VARIABLES} == saved
    assert torch.get_num_threads() == outside
    with fixed_threads(None):
        assert torch.get_num_threads() == outside


def test_an_svd_under_a_fixed_count_is_the_one_a_one_thread_process_computes():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((1000, 256)), rng.standard_normal((1000, 256))
    with threadpool_limits(1):
        alone = _leading_correlations(X, Y)
    with threadpool_limits(2), fixed_threads(1):
        assert _leading_correlations(X, Y) == alone  # to the last bit


def test_workers_start_with_every_pool_at_the_count():
    assert thread_variables(3) == {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3", "OPENBLAS_NUM_THREADS": "3"}


def test_a_worker_pins_every_pool_for_good(monkeypatch):
    # page workers and Ray workers set themselves at their count when they start: torch
    # alone had left a Ray worker's NumPy BLAS at one thread per core
    from relbench.threads import pin_threads

    for var in THREAD_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    np.ones(4) @ np.ones(4)
    before = torch.get_num_threads()
    try:
        with threadpool_limits(2):  # restores the pools the pin changes
            pin_threads(1)
            assert _blas_threads() == {1} and torch.get_num_threads() == 1
            assert all(os.environ[var] == "1" for var in THREAD_VARIABLES)
    finally:
        torch.set_num_threads(before)
