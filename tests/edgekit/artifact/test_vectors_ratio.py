"""Test vectors that deflate far past the zip-bomb ratio are still real arrays: a CTC model's
softmax over thousands of classes is nearly all zeros (PP-OCRv4 rec: 4.2 MB from 7 kB)."""

import io

import numpy as np
import pytest

from edgekit.artifact.vectors import VECTOR_RATIO_FREE_BYTES, read_vectors
from edgekit.errors import ArtifactError


def npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def test_a_mostly_zero_softmax_vector_reads() -> None:
    scores = np.zeros((4, 40, 6625), np.float32)  # 4.2 MB, deflates > 500x
    scores[:, :, 0] = 1.0
    arrays = read_vectors(npz(**{"out/tflite/softmax": scores}), "a.edgekit", 1 << 30)
    assert np.array_equal(arrays["out/tflite/softmax"], scores)


def test_a_large_member_past_the_ratio_is_still_refused() -> None:
    zeros = np.zeros(VECTOR_RATIO_FREE_BYTES // 4 + 1024, np.float32)
    with pytest.raises(ArtifactError, match="zip bomb"):
        read_vectors(npz(out=zeros), "a.edgekit", 1 << 30)
