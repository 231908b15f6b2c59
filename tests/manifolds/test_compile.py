"""torch.compile of manifold ops on MC input (issue 16): refused loudly on CPU.

Inductor's CPU code is not exact for MC kernels (see ``hypermc/mcf/compile.py``), so a
compiled manifold distance on CPU MC input must raise MCCompileError naming the op
(before issue 16 it failed with an unrelated FakeTensor error).
"""

from __future__ import annotations

import pytest
import torch

import hypermc as hm
from hypermc.manifolds import PoincareBall

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:MCTensor does not implement _stable_hash_for_caching:UserWarning"),
]


def test_compiled_ball_dist0_on_cpu_mc_input_is_refused():
    torch._dynamo.reset()
    m = PoincareBall()
    x = hm.mc(torch.tensor([[0.1, 0.2]], dtype=torch.float64), nc=2)
    f = torch.compile(m.dist0, fullgraph=True, dynamic=False)
    with pytest.raises(Exception, match=r"MCTensor op aten\.\w+\.\w+ cannot be compiled exactly on the CPU"):
        f(x)
    torch._dynamo.reset()
