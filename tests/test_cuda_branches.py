"""CPU tests of branches otherwise taken only on CUDA (docs/cuda_paths.md lists every such branch, with the test
that reaches it or the reason none can on a CPU). The resize onto the decoding grid: tests/test_eval_resize.py."""

import pytest
import torch

from simplepose.utils.distributed import select_device
from simplepose.utils.errors import UserError


@pytest.mark.skipif(torch.cuda.is_available(), reason="asks for CUDA on a machine without it")
def test_asking_for_cuda_without_it_names_the_setting_to_change():
    assert select_device("auto") == torch.device("cpu")
    for name in ("cuda", "cuda:1"):
        with pytest.raises(UserError) as e:
            select_device(name)
        assert e.value.key == "device"
