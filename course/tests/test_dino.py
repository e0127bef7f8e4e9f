"""DINO in miniature (vitlib.objectives.dino, course.dino) and the k-NN evaluation of frozen features."""

import math

import pytest
import torch

from course.dino import (
    blur,
    cls_attention,
    entropies,
    foreground_patches,
    foreground_share,
    jitter,
    knn_monitor,
    make_views,
    pretrain_dino,
)
from vitlib import create_model
from vitlib.analysis.probe import knn_accuracy
from vitlib.data import Dataset, TensorSplit
from vitlib.objectives.dino import DINO, DINOHead, dino_loss, teacher_momentum, updated_centre
from vitlib.train import TrainConfig


def tiny_vit(seed=0):
    torch.manual_seed(seed)
    return create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1, dim=32, depth=1, heads=2)


def random_data(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    split = TensorSplit(torch.randint(0, 256, (n, 1, 28, 28), dtype=torch.uint8, generator=g), torch.zeros(n).long())
    return Dataset("random", split, None, split, tuple("0123456789"), 1, 28, (0.5,), (0.5,))


def test_the_centre_is_a_moving_average_of_the_teachers_outputs():
    c = torch.tensor([1.0, -1.0, 0.0])
    t1, t2 = torch.tensor([[0.0, 2.0, 4.0], [2.0, 0.0, 2.0]]), torch.tensor([[4.0, 4.0, 0.0]])
    by_hand = 0.9 * c + 0.1 * torch.tensor([6.0, 6.0, 6.0]) / 3  # the mean over every view's rows
    assert torch.allclose(updated_centre(c, [t1, t2], 0.9), by_hand)


def test_the_loss_is_the_mean_cross_entropy_over_pairs_of_different_views():
    torch.manual_seed(0)
    student, teacher, c = [torch.randn(5, 8) for _ in range(3)], [torch.randn(5, 8) for _ in range(2)], torch.randn(8)
    terms = []
    for i, t in enumerate(teacher):
        p = torch.exp((t - c) / 0.04) / torch.exp((t - c) / 0.04).sum(1, keepdim=True)
        for j, s in enumerate(student):
            if i != j:
                log_q = s / 0.1 - torch.logsumexp(s / 0.1, dim=1, keepdim=True)
                terms.append(-(p * log_q).sum(1).mean())
    assert len(terms) == 4  # teacher views 0, 1 against the student's other views
    assert torch.allclose(dino_loss(student, teacher, c, 0.1, 0.04), sum(terms) / len(terms), atol=1e-5)
    with pytest.raises(ValueError, match="two views"):
        dino_loss(student[:1], teacher[:1], c, 0.1, 0.04)


def test_sharpening_lowers_the_entropy_and_centring_spreads_the_prototypes():
    torch.manual_seed(0)
    logits = torch.randn(64, 16)
    logits[:, 3] += 2.0  # one prototype dominates every image
    zero = torch.zeros(16)
    sharp, soft = entropies(logits, zero, 0.04), entropies(logits, zero, 0.1)
    assert sharp[1] < soft[1] and sharp[0] < soft[0]
    centred = entropies(logits, logits.mean(0), 0.04)
    assert centred[0] > sharp[0]  # subtracting the mean output removes the dominant prototype
    assert 0 <= sharp[1] <= sharp[0] <= math.log(16) + 1e-6  # concavity: H(mean p) >= mean H(p)


def test_the_momentum_rises_from_its_base_to_one_along_a_cosine():
    values = [teacher_momentum(s, 100, 0.996) for s in range(101)]
    assert values[0] == pytest.approx(0.996) and values[-1] == pytest.approx(1.0)
    assert values[50] == pytest.approx(0.998)
    assert all(a <= b for a, b in zip(values, values[1:]))


def test_the_head_ends_in_unit_norm_prototypes_on_a_normalised_bottleneck():
    head = DINOHead(32, prototypes=20, hidden=16, bottleneck=8)
    out = head(torch.randn(4, 32))
    assert out.shape == (4, 20)
    w = head.last.weight
    assert torch.allclose(w.norm(dim=1), torch.ones(20), atol=1e-5)
    assert out.abs().max() <= 1 + 1e-5  # cosine of a unit bottleneck with unit prototypes


def test_the_teacher_gets_no_gradient_and_follows_the_student_as_an_ema():
    dino = DINO(tiny_vit(), prototypes=16, hidden=16, bottleneck=8)
    views = make_views(random_data(8).train.images, 2, 1)
    loss, teacher = dino(views)
    loss.backward()
    assert all(p.grad is None for p in dino.teacher_parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in dino.student_parameters())
    assert len(teacher) == 2 and teacher[0].shape == (8, 16)
    with torch.no_grad():
        for p in dino.student_parameters():
            p.add_(0.5)
    before = [p.clone() for p in dino.teacher_parameters()]
    dino.update_teacher(0.9)
    for t0, t1, s in zip(before, dino.teacher_parameters(), dino.student_parameters()):
        assert torch.allclose(t1, 0.9 * t0 + 0.1 * s, atol=1e-6)


def test_the_centre_moves_only_while_training_and_with_centring():
    data = random_data(8)
    for centring, training, moves in ((True, True, True), (False, True, False), (True, False, False)):
        dino = DINO(tiny_vit(), prototypes=16, hidden=16, bottleneck=8, centring=centring).train(training)
        dino(make_views(data.train.images, 2))
        assert (dino.centre.abs().sum() > 0) == moves


def test_views_are_normalised_crops_of_the_same_size():
    images = random_data(4).train.images
    views = make_views(images, 2, 2, mean=(0.5,), std=(0.5,))
    assert len(views) == 4 and all(v.shape == (4, 1, 28, 28) for v in views)
    assert all(v.min() >= -1 - 1e-5 and v.max() <= 1 + 1e-5 for v in views)
    assert not torch.allclose(views[0], views[1])


def test_every_image_of_a_batch_gets_its_own_view():
    images = random_data(1).train.images.repeat(16, 1, 1, 1)  # one image, 16 times
    torch.manual_seed(0)
    view = make_views(images, 1)[0]
    assert len({tuple(v.flatten()[:50].tolist()) for v in view}) == 16, "16 copies, 16 different crops"
    torch.manual_seed(0)
    assert torch.equal(make_views(images, 1)[0], view), "the same seed, the same views"


def test_jitter_and_blur_keep_what_they_must():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(8, 1, 28, 28, generator=g)
    assert torch.equal(jitter(x, g, p=0.0), x) and torch.equal(blur(x, g, p=0.0), x), "p = 0: untouched"
    flat = torch.full((8, 1, 28, 28), 0.3)
    assert torch.allclose(blur(flat, g, p=1.0), flat, atol=1e-6), "a normalised kernel leaves a flat image flat"
    y = jitter(x, g, p=1.0, strength=0.4)
    assert y.min() >= 0 and y.max() <= 1 and not torch.allclose(y, x)
    sharp = torch.zeros(1, 1, 5, 5)
    sharp[0, 0, 2, 2] = 1.0
    blurred = blur(sharp, g, p=1.0, sigma=(1.0, 1.0))
    k = torch.exp(-torch.tensor([1.0, 0.0, 1.0]) / 2)
    k = k / k.sum()
    assert torch.allclose(blurred[0, 0, 1:4, 1:4], k[:, None] * k[None, :], atol=1e-6), "the 3x3 Gaussian of sigma 1"


def test_centring_and_sharpening_keep_the_teacher_from_collapsing_on_random_data():
    data = random_data(256)
    # DINO's recipe (weight decay 0.04, clipping at 3), warm-up 10 steps of the 8 per epoch
    cfg = TrainConfig(
        steps=25, batch_size=32, lr=3e-3, weight_decay=0.04, grad_clip=3.0, warmup_epochs=10 / 8, device="cpu"
    )
    common = dict(momentum=0.99, prototypes=32, hidden=32, bottleneck=16)
    full = pretrain_dino(tiny_vit(), data, cfg, **common)[1]
    one = pretrain_dino(tiny_vit(), data, cfg, centring=False, **common)[1]
    uniform = pretrain_dino(tiny_vit(), data, cfg, tau_t=0.1, **common)[1]
    k = math.log(32)
    assert full[-1]["h_mean"] > 0.5 * k, "with both, the teacher's outputs spread over the prototypes"
    assert full[-1]["h_mean"] > one[-1]["h_mean"], "without centring the outputs gather on fewer prototypes"
    assert full[-1]["h_each"] < uniform[-1]["h_each"], "without sharpening every output drifts towards uniform"
    assert all(math.isfinite(r["loss"]) for r in full)


def monitored_run(scores, steps=40, evaluations=10, **options):
    """A DINO run of `steps` (eval every steps // evaluations) whose monitor returns `scores` one after another and
    records the teacher's weights it was shown; patience 2, one tenfold drop of the rate under 'plateau'."""
    seen, it = [], iter(scores)

    def monitor(teacher):
        seen.append({k: v.clone() for k, v in teacher.state_dict().items()})
        return next(it)

    cfg = TrainConfig(
        steps=steps,
        batch_size=32,
        lr=3e-3,
        weight_decay=0.04,
        grad_clip=3.0,
        warmup_epochs=1 / 8,
        device="cpu",
        schedule="plateau",
        patience=2,
        lr_drops=1,
    )
    dino, history = pretrain_dino(
        tiny_vit(),
        random_data(256),
        cfg,
        momentum=0.99,
        prototypes=16,
        hidden=16,
        bottleneck=8,
        monitor=monitor,
        evaluations=evaluations,
        **options,
    )
    return dino, history, seen


def test_a_monitored_dino_run_stops_on_its_plateau_and_keeps_the_best_teacher():
    # evaluated every 4 steps: best at step 8, no better at 12, 16 (stall: the rate drops tenfold), 20, 24 (stall: stop)
    dino, history, seen = monitored_run([0.1, 0.5, 0.4, 0.3, 0.2, 0.2, 0.9, 0.9, 0.9, 0.9])
    assert dino.stopping == dict(stopped="plateau", steps=24, best_step=8, best_score=0.5)
    assert [r["step"] for r in history if "monitor" in r] == [4, 8, 12, 16, 20, 24]
    assert all(torch.equal(v, seen[1][k]) for k, v in dino.teacher.state_dict().items()), "the best teacher is kept"
    assert not all(torch.equal(v, seen[-1][k]) for k, v in dino.teacher.state_dict().items())


def test_a_monitored_dino_run_that_keeps_improving_uses_its_whole_budget():
    dino, history, _ = monitored_run([0.1 * i for i in range(1, 11)])
    assert dino.stopping == dict(stopped="budget", steps=40, best_step=40, best_score=pytest.approx(1.0))
    assert len(history) == 40


def test_a_dino_run_without_a_monitor_runs_its_budget_and_says_so():
    cfg = TrainConfig(steps=3, batch_size=32, lr=3e-3, warmup_epochs=1 / 8, device="cpu")
    dino, history = pretrain_dino(tiny_vit(), random_data(64), cfg, prototypes=16, hidden=16, bottleneck=8)
    assert dino.stopping == dict(stopped="budget", steps=3, best_step=3, best_score=None) and len(history) == 3


def test_a_monitored_dino_run_needs_patience():
    with pytest.raises(ValueError, match="patience >= 1"):
        pretrain_dino(tiny_vit(), random_data(64), TrainConfig(steps=3, batch_size=32), monitor=lambda t: 0.0)


def test_the_knn_monitor_scores_the_validation_split_and_refuses_a_data_set_without_one():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(60) % 2
    images = (labels.view(-1, 1, 1, 1) * 200 + torch.randint(0, 40, (60, 1, 28, 28), generator=g)).to(torch.uint8)
    train, val = TensorSplit(images[:40], labels[:40]), TensorSplit(images[40:], labels[40:])
    data = Dataset("two", train, val, val, ("dark", "bright"), 1, 28, (0.5,), (0.5,))
    assert knn_monitor(data, k=5)(tiny_vit()) == 1.0, (
        "two classes apart in brightness: even a random ViT separates them"
    )
    with pytest.raises(ValueError, match="validation split"):
        knn_monitor(random_data(64))


def test_knn_votes_by_cosine_similarity_weighted_by_temperature():
    train_x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.2, 0.8]])
    train_y = torch.tensor([0, 0, 1, 1, 1])
    test_x, test_y = torch.tensor([[5.0, 0.2], [0.1, 3.0]]), torch.tensor([0, 1])  # the scale does not matter
    assert knn_accuracy(train_x, train_y, test_x, test_y, k=2) == 1.0
    # with k = 5 a plain majority says class 1 for every image; weights exp(sim / 0.07) keep the near neighbours' vote
    assert knn_accuracy(train_x, train_y, test_x, test_y, k=5, temperature=None) == 0.5
    assert knn_accuracy(train_x, train_y, test_x, test_y, k=5, temperature=0.07) == 1.0
    with pytest.raises(ValueError, match="k must be"):
        knn_accuracy(train_x, train_y, test_x, test_y, k=6)


def test_the_foreground_share_of_the_class_attention():
    raw = torch.zeros(1, 1, 4, 4)
    raw[0, 0, :2, :2] = 1.0  # one bright patch of four (2x2 patches)
    assert foreground_patches(raw, 2).tolist() == [[True, False, False, False]]
    w = torch.zeros(1, 2, 5, 5)
    w[0, 0, 0] = torch.tensor([0.2, 0.4, 0.4, 0.0, 0.0])  # head 0: half of its patch attention on the object
    w[0, 1, 0] = torch.tensor([0.0, 0.1, 0.3, 0.3, 0.3])  # head 1: a tenth
    assert torch.allclose(cls_attention(w), torch.tensor([[0.3, 0.4, 0.15, 0.15]]))
    assert foreground_share(w, raw, 2).item() == pytest.approx(0.3)
    assert foreground_share(w, raw, 2, head="best").item() == pytest.approx(0.5)
