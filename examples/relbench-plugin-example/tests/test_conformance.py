import pytest
from relbench.api import check_similarity
from relbench_example_plugin import GaussianKernel

@pytest.mark.parametrize("bandwidth", [0.5, 1.0, 2.0])
def test_gaussian_kernel_conforms(bandwidth):
    check_similarity(GaussianKernel(bandwidth=bandwidth))
