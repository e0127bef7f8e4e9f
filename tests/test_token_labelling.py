import dataclasses

import pytest
import torch
import torch.nn.functional as F

from vitlib import VisionTransformer
from vitlib.data import Dataset, TensorSplit
from vitlib.model import SmallResNet
from vitlib.objectives import TokenLabelling, dense_scores, get_objective, token_loss, token_targets, wrap
from vitlib.train import TrainConfig, evaluate, train
from vitlib.train.config import check_config


def vit(**kw):
    torch.manual_seed(0)
    cfg = dict(image_size=16, patch_size=4, in_channels=1, num_classes=5, dim=16, depth=1, heads=2, mlp_dim=32)
    return VisionTransformer(**{**cfg, **kw})


def teacher():
    torch.manual_seed(1)
    cnn = SmallResNet(depth=8, width=4, in_channels=1, num_classes=5)
    for m in cnn.modules():  # non-trivial BatchNorm statistics, so that train / eval mode would differ
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    torch.nn.init.normal_(cnn.head.weight)
    return cnn.eval()


def test_dense_scores_average_to_the_teachers_logits():
    cnn, x = teacher(), torch.randn(3, 1, 16, 16)
    with torch.no_grad():
        s = dense_scores(cnn, x)
        assert s.shape == (3, 5, 4, 4)  # stride 4: a 16x16 image -> a 4x4 map of class scores
        torch.testing.assert_close(s.mean((2, 3)), cnn(x), atol=1e-5, rtol=1e-5)


def test_token_targets_pool_each_patch_area_in_row_order():
    scores = torch.zeros(1, 2, 4, 4)
    scores[0, 0, :2, 2:] = 4.0  # class 0 strong in the top-right quarter only
    t = token_targets(scores, (2, 2), temperature=2.0)
    assert t.shape == (1, 4, 2)
    torch.testing.assert_close(t.sum(-1), torch.ones(1, 4))
    expected = torch.tensor([2.0, 0.0]).softmax(0)  # (4 - 0) / 2
    torch.testing.assert_close(t[0, 1], expected)  # token 1 = row 0, column 1
    torch.testing.assert_close(t[0, 0], torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="temperature"):
        token_targets(scores, (2, 2), temperature=0)


def test_token_loss_equals_the_hand_computation():
    logits, targets = torch.randn(2, 3, 4), torch.rand(2, 3, 4).softmax(-1)
    hand = torch.zeros(2)
    for b in range(2):
        for i in range(3):
            hand[b] -= sum(targets[b, i, k] * torch.log(logits[b, i].softmax(0)[k]) for k in range(4)) / 3
    torch.testing.assert_close(token_loss(logits, targets), hand)
    one_hot = F.one_hot(torch.tensor([[1, 2, 0]]), 4).float()  # a one-hot target gives the ordinary cross-entropy
    torch.testing.assert_close(token_loss(logits[:1], one_hot)[0], F.cross_entropy(logits[0], one_hot[0].argmax(1)))


def test_total_loss_is_class_plus_beta_token_plus_kd():
    model, x = TokenLabelling(vit(), teacher(), beta=0.5, kd=0.3, temperature=2.0), torch.randn(4, 1, 16, 16)
    y = torch.tensor([0, 1, 2, 3])
    torch.nn.init.normal_(model.token_head.weight)
    torch.nn.init.normal_(model.vit.head.weight)
    parts = model.losses(x, y)
    z = model.vit.forward_features(x)
    logits = model.vit(x)
    targets, glob = model.teacher_targets(x)
    assert targets.shape == (4, 16, 5) and glob.shape == (4, 5)
    hand = (
        F.cross_entropy(logits, y, reduction="none")
        + 0.5 * token_loss(model.token_head(z[:, 1:]), targets)
        - 0.3 * (glob * logits.log_softmax(-1)).sum(-1)
    )
    torch.testing.assert_close(parts["total"], hand)
    loss, correct, out = model(x, y)
    torch.testing.assert_close(loss, hand.mean())
    assert int(correct) == int((logits.argmax(1) == y).sum())
    torch.testing.assert_close(model(x, y, reduction="sum").loss, hand.sum())
    torch.testing.assert_close(model(x), logits)  # without labels: the [class] prediction
    model.eval()  # evaluation: the [class] cross-entropy alone, comparable across beta and kd
    torch.testing.assert_close(model(x, y).loss, F.cross_entropy(logits, y))


def test_beta_zero_is_the_plain_classification_loss_and_never_runs_the_teacher():
    class Boom(torch.nn.Module):
        def forward(self, x):
            raise AssertionError("the teacher must not run")

    v, x, y = vit(), torch.randn(4, 1, 16, 16), torch.tensor([0, 1, 2, 3])
    torch.nn.init.normal_(v.head.weight)
    model = TokenLabelling(v, teacher(), beta=0.0)
    model.teacher.stem.forward = Boom().forward
    loss = get_objective("token").loss(model, x, y).loss
    torch.testing.assert_close(loss, get_objective("classify").loss(v, x, y).loss)


def test_teacher_is_frozen_and_stays_in_eval_mode():
    model = TokenLabelling(vit(), teacher(), beta=0.5)
    model.train()
    assert model.vit.training and not model.teacher.training
    assert not any(p.requires_grad for p in model.teacher.parameters())
    loss = model(torch.randn(2, 1, 16, 16), torch.tensor([0, 1])).loss
    loss.backward()
    assert all(p.grad is None for p in model.teacher.parameters())
    assert model.token_head.weight.grad is not None and model.token_head.weight.grad.abs().sum() > 0


def _data(n=64):
    g = torch.Generator().manual_seed(0)

    def split(k):
        images = torch.randint(0, 256, (k, 1, 16, 16), dtype=torch.uint8, generator=g)
        return TensorSplit(images, torch.randint(0, 5, (k,), generator=g))

    return Dataset("toy", split(n), None, split(32), tuple("abcde"), 1, 16, (0.5,), (0.25,))


def test_a_class_only_run_through_the_wrapper_equals_plain_classification():
    cfg = TrainConfig(epochs=1, batch_size=16, device="cpu", progress=False, eval_test=True)
    plain = train(cfg, model=vit(), data=_data())
    wrapped = train(
        dataclasses.replace(cfg, objective="token"), model=TokenLabelling(vit(), teacher(), 0.0), data=_data()
    )
    for k, v in plain.model.state_dict().items():
        torch.testing.assert_close(wrapped.model.vit.state_dict()[k], v)
    assert wrapped.test["acc"] == plain.test["acc"]
    tl = train(dataclasses.replace(cfg, objective="token"), model=TokenLabelling(vit(), teacher(), 0.5), data=_data())
    assert torch.isfinite(torch.tensor(tl.test["loss"])) and 0 <= evaluate(tl.model, _loader())["acc"] <= 1


def _loader():
    from vitlib.train.factory import make_loader

    data = _data()
    return make_loader(data.test, data, TrainConfig(batch_size=16), False, torch.device("cpu"))


def test_config_refuses_what_token_labelling_cannot_do():
    with pytest.raises(ValueError, match="MixToken"):
        check_config(TrainConfig(objective="token", mixup=0.2))
    with pytest.raises(ValueError, match="teacher"):
        wrap("token", vit())
    with pytest.raises(ValueError, match="beta"):
        TokenLabelling(vit(), teacher(), beta=-1)
