"""1-D convolutions and pools -> the 2-D int8 kernels with H = 1 (lift1d.py): plain, strided
with padding, depthwise, grouped, MaxPool1d and AvgPool1d, held channels-last between them so
that the only layout ops are one RESHAPE into and out of each lifted kernel. The net starts
as audio nets do, ``x[:, None, :]`` on the float model input, which onnxruntime's quantizer
leaves float and the writer quantizes before it (qdq_fill.py)."""

from __future__ import annotations

import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from .helpers import ops_of
from .op_parity import build, check

SHAPE = (1, 64)  # [N, L]: raw samples


class Audio(nn.Module):
    """Conv1d stem, pool, depthwise and grouped Conv1d: an audio front end in miniature."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv1d(1, 8, 5, stride=2, padding=2)
        self.depthwise = nn.Conv1d(8, 8, 3, padding=1, groups=8)
        self.grouped = nn.Conv1d(8, 6, 3, padding=1, groups=2)

    def forward(self, x):
        x = F.max_pool1d(F.relu(self.stem(x[:, None, :])), 3, 2, 1)
        x = self.grouped(F.relu(self.depthwise(x)))
        # last: LiteRT's int8 average rounds ties away from zero, onnxruntime's Q to even, so
        # a layer after it could turn that one step into two
        return F.avg_pool1d(x, 2)


def test_conv1d_and_pool1d_are_int8_and_match_onnx(tmp_path):
    model = check(build(Audio(), SHAPE, tmp_path, "int8"), "Conv")
    assert model.float_ops == []
    names = [name for name, _ in ops_of(model.data)]
    assert names.count("CONV_2D") == 1 + 2 and names.count("DEPTHWISE_CONV_2D") == 1
    assert "MAX_POOL_2D" in names and "AVERAGE_POOL_2D" in names
    # channels-last throughout, the unsqueezed input included: no TRANSPOSE
    assert "DEQUANTIZE" not in names and "TRANSPOSE" not in names
