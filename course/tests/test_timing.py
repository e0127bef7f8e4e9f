"""course.timing: the training-throughput measure of the benchmarks and of notebook 16."""

import pytest
import torch

from course.timing import logged_throughput, train_throughput
from vitlib import VisionTransformer

BASE = dict(image_size=28, patch_size=7, in_channels=1, num_classes=10)


def test_train_throughput_measures_and_leaves_the_model_alone(one_thread):
    model = VisionTransformer(**BASE, dim=16, depth=1, heads=2, mlp_dim=32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    threads = torch.get_num_threads()
    ips = train_throughput(model, batch_size=8, steps=1, repeats=2, threads=1)
    assert ips > 0 and torch.get_num_threads() == threads
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match="at least 1"):
        train_throughput(model, batch_size=0)


def test_train_throughput_of_a_cnn_needs_the_image_size(one_thread):
    from vitlib.model.cnn import create_cnn

    cnn = create_cnn("ResNet-8", 10, 1)
    with pytest.raises(ValueError, match="image_size"):
        train_throughput(cnn, batch_size=4)
    assert train_throughput(cnn, batch_size=4, steps=1, repeats=1, image_size=28, in_channels=1) > 0


def test_logged_throughput_is_the_median():
    assert logged_throughput([{"images_per_s": 100.0}, {"images_per_s": 300.0}, {"images_per_s": 200.0}]) == 200.0
    with pytest.raises(ValueError, match="result.steps"):
        logged_throughput([{"loss": 1.0}])
