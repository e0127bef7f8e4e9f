"""vitlib.analysis.cost: sequence length against patch size."""

import pytest

from vitlib.analysis.cost import sequence_length


@pytest.mark.parametrize("patch_size,n", [(4, 49), (7, 16), (14, 4), (28, 1)])
def test_sequence_length_is_hw_over_p_squared(patch_size, n):
    assert sequence_length(28, patch_size) == n == 28 * 28 // patch_size**2
    assert sequence_length(28, patch_size, class_token=True) == n + 1
    assert sequence_length((224, 224), 16) == 196 and sequence_length(224, 32) == 49  # ViT-B/16 and B/32


def test_sequence_length_rejects_a_patch_that_does_not_divide():
    with pytest.raises(ValueError, match="does not divide"):
        sequence_length(28, 5)
