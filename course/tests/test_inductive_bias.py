"""course.inductive_bias: the shuffles, the models of the experiment, and the exact statements the notebook
teaches (a pixel shuffle absorbed into a Linear layer, a patch shuffle into E_pos, a convolution's receptive field
and translation equivariance)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from course import inductive_bias as ib  # noqa: E402
from course.datasize import equivariance_error, shift  # noqa: E402
from course.experiments import Experiment  # noqa: E402
from vitlib import create_model  # noqa: E402
from vitlib.data import Dataset, TensorSplit  # noqa: E402


def tiny_data(n=12, size=8, channels=1):
    g = torch.Generator().manual_seed(0)
    split = TensorSplit(
        torch.randint(0, 256, (n, channels, size, size), generator=g, dtype=torch.uint8), torch.arange(n) % 3
    )
    return Dataset("tiny", split, split, split, ("a", "b", "c"), channels, size, (0.5,) * channels, (0.25,) * channels)


def test_fixed_permutation_is_a_permutation_fixed_by_its_seed():
    p = ib.fixed_permutation(16, 3)
    assert sorted(p.tolist()) == list(range(16))
    assert torch.equal(p, ib.fixed_permutation(16, 3)) and not torch.equal(p, ib.fixed_permutation(16, 4))
    x = torch.randn(16)
    assert torch.equal(x[p][ib.inverse_permutation(p)], x)
    assert torch.equal(ib.permutation_matrix(p) @ x, x[p])


def test_patch_shuffle_moves_whole_patches():
    x = torch.arange(2 * 3 * 8 * 8).reshape(2, 3, 8, 8)
    perm = ib.fixed_permutation(4, 0)
    y = ib.shuffle_patches(x, perm, 4)
    for j in range(4):
        r, c = divmod(j, 2)
        sr, sc = divmod(perm[j].item(), 2)
        assert torch.equal(
            y[..., 4 * r : 4 * r + 4, 4 * c : 4 * c + 4], x[..., 4 * sr : 4 * sr + 4, 4 * sc : 4 * sc + 4]
        )
    with pytest.raises(ValueError, match="permutation of 5 patches"):
        ib.shuffle_patches(x, torch.arange(5), 4)


def test_pixel_shuffle_keeps_the_pixels_and_moves_channels_together():
    x = torch.randn(2, 3, 5, 5)
    perm = ib.fixed_permutation(25, 1)
    y = ib.shuffle_pixels(x, perm)
    assert torch.equal(y.flatten(2), x.flatten(2)[:, :, perm])
    assert torch.equal(y.flatten(2).sort(-1).values, x.flatten(2).sort(-1).values)
    assert not torch.equal(y, x)


def test_shuffled_dataset_uses_one_permutation_for_every_split():
    data = tiny_data()
    for kind in ib.INPUTS:
        out = ib.shuffled_dataset(data, kind, 4, seed=7)
        assert torch.equal(out.train.images, ib.shuffle(data.train.images, kind, 4, 7))
        assert torch.equal(out.test.images, out.train.images)  # the same images in every split of tiny_data
        assert torch.equal(out.train.labels, data.train.labels)
    assert torch.equal(ib.shuffled_dataset(data, "original", 4, 7).train.images, data.train.images)
    with pytest.raises(ValueError, match="unknown input"):
        ib.shuffle(data.train.images, "rows", 4, 0)


@pytest.mark.parametrize("kind", ib.MODELS)
def test_build_model_gives_logits_for_every_kind(kind):
    data = tiny_data(size=8)
    sizes = dict(mlp_hidden=8, rnn_hidden=8, cnn="ResNet-8-w4", vit=dict(name="ViT-Micro/4", dim=16, depth=1, heads=2))
    model = ib.build_model(kind, data, sizes)
    assert model(torch.randn(3, 1, 8, 8)).shape == (3, 3)
    with pytest.raises(ValueError, match="unknown model"):
        ib.build_model("SVM", data, sizes)


def test_a_linear_layer_absorbs_a_pixel_shuffle_exactly():
    torch.manual_seed(0)
    lin, perm = nn.Linear(36, 5), ib.fixed_permutation(36, 2)
    x = torch.randn(4, 1, 6, 6)
    moved = ib.absorb_pixel_permutation(lin, perm)
    assert torch.allclose(moved(ib.shuffle_pixels(x, perm).flatten(1)), lin(x.flatten(1)), atol=1e-6)
    assert not torch.allclose(lin(ib.shuffle_pixels(x, perm).flatten(1)), lin(x.flatten(1)), atol=1e-3)


def test_e_pos_absorbs_a_patch_shuffle_exactly():
    torch.manual_seed(0)
    vit = create_model("ViT-Micro/4", num_classes=3, image_size=8, in_channels=1, dim=16, depth=2, heads=2)
    perm, x = ib.fixed_permutation(4, 5), torch.randn(2, 1, 8, 8)
    moved = ib.absorb_patch_permutation(vit, perm)
    with torch.no_grad():
        assert torch.allclose(
            moved.forward_features(ib.shuffle_patches(x, perm, 4))[:, 0], vit.forward_features(x)[:, 0], atol=1e-5
        )
        assert not torch.allclose(
            vit.forward_features(ib.shuffle_patches(x, perm, 4))[:, 0], vit.forward_features(x)[:, 0], atol=1e-4
        )
    with pytest.raises(ValueError, match="learned 1D E_pos"):
        ib.absorb_patch_permutation(create_model("ViT-Micro/4", 3, 8, 1, pos_embed="none"), perm)


def test_a_convolution_is_local_and_translation_equivariant_a_linear_layer_is_neither():
    torch.manual_seed(0)
    conv, x = nn.Conv2d(1, 4, 3, padding=1), torch.randn(1, 1, 12, 12)
    field = ib.influence(conv, x, lambda y: y[:, :, 5, 6])
    assert torch.equal((field > 0).nonzero().min(0).values, torch.tensor([4, 5]))
    assert torch.equal((field > 0).nonzero().max(0).values, torch.tensor([6, 7]))
    assert ib.translation_error(conv, x, 2, -1, border=1) < 1e-6
    lin = nn.Linear(144, 144)

    def dense(t):
        return lin(t.flatten(1)).reshape(t.shape)

    assert (ib.influence(dense, x, lambda y: y[:, :, 5, 6]) > 0).all()
    assert ib.translation_error(dense, x, 2, -1, border=1) > 1e-2
    # one check behind both: the data-size study's equivariance_error, with zeros shifted in and the difference itself
    assert ib.translation_error(dense, x, 2, -1, border=1) == equivariance_error(
        dense, x, 2, -1, circular=False, border=1, relative=False
    )
    assert torch.equal(shift(x, 2, -1, circular=False)[..., 2:, :-1], x[..., :-2, 1:])
    assert (shift(x, 2, -1, circular=False)[..., :2, :] == 0).all()


def test_trainer_makes_the_run_experiment_train_makes():
    # the notebook's runs (each model at its own rate, chosen by sweep.choose_rates) come from ib.trainer: a run of it
    # must be the run Experiment.train makes of the same model, input, rate and seed, number for number
    from vitlib.train import TrainConfig

    data = tiny_data(n=24, size=8)
    sizes = dict(mlp_hidden=8, rnn_hidden=8, cnn="ResNet-8-w4", vit=dict(name="ViT-Micro/4", dim=16, depth=1, heads=2))
    cfg = TrainConfig(epochs=2, batch_size=8, lr=3e-3, patience=1, schedule="plateau", progress=False, log_every=1000)
    for model in ("CNN", "ViT"):
        exp = Experiment("t")
        exp.train(
            "a",
            cfg,
            [1],
            data=lambda seed: ib.shuffled_dataset(data, "patches", 4, seed=1000 + seed),
            model=lambda seed, model=model: ib.build_model(model, data, sizes),
        )
        exp.run("b", ib.trainer(cfg, data, model, "patches", 4, sizes), [1])
        a, b = ({k: v for k, v in r.items() if k not in ("condition", "train_time_s", "wall_s")} for r in exp.rows)
        assert a == b and a["stopped"] in ("plateau", "budget")
        other = ib.trainer(cfg, data, model, "pixels", 4, sizes)(1)
        assert other["test_acc"] != a["test_acc"] or other["train_loss"] != a["train_loss"]


def test_drop_and_the_grouped_bars():
    exp = Experiment("t")
    for m in ("CNN", "ViT"):
        for kind, acc in (("original", 0.8), ("patches", 0.7 if m == "CNN" else 0.8)):
            for seed, noise in enumerate((0.0, 0.01, -0.01)):
                exp.add(ib.condition(m, kind), seed, {"test_acc": acc + noise})
    cost = ib.drop(exp, "CNN", "patches")
    assert cost["diff"] == pytest.approx(0.1) and cost["se"] == pytest.approx((2 * 0.01**2 / 3) ** 0.5)
    assert cost["df"] == pytest.approx(4) and cost["low"] < 0.1 < cost["high"]
    fig, ax = plt.subplots()
    ib.plot_accuracy_bars(ax, exp, models=("CNN", "ViT"), inputs=("original", "patches"), chance=0.1)
    assert len(ax.patches) == 4 and [t.get_text() for t in ax.get_xticklabels()] == ["CNN", "ViT"]
    assert ax.patches[0].get_height() == pytest.approx(0.8)
    plt.close(fig)


def test_a_gru_is_one_cell_applied_at_every_step_and_depends_on_the_order():
    torch.manual_seed(0)
    gru, seq = nn.GRU(5, 7, batch_first=True), torch.randn(2, 6, 5)
    with torch.no_grad():
        out, h = gru(seq)
        assert torch.allclose(ib.gru_by_hand(gru, seq), out, atol=1e-6)
        assert not torch.allclose(gru(seq.flip(1))[1], h, atol=1e-3)
    model = ib.RowGRU(4, 3, 2)
    x = torch.arange(32.0).reshape(1, 2, 4, 4)
    assert torch.equal(model.rows(x)[0, 1], x[0, :, 1].T.flatten())  # row 1, its pixels with their channels


def test_influence_sees_through_a_layernorm_and_attention_is_global():
    torch.manual_seed(0)
    vit = create_model(
        "ViT-Micro/4", num_classes=3, image_size=8, in_channels=1, dim=16, depth=1, heads=2, pos_embed="none"
    )
    field = ib.influence(vit.forward_features, torch.randn(1, 1, 8, 8), lambda z: z[:, 1])
    assert (field > 0).all()  # one block: patch token 0 already depends on every pixel
    norm_only = ib.influence(
        lambda t: nn.functional.layer_norm(t, t.shape[-1:]), torch.randn(1, 1, 4, 4), lambda y: y[:, :, 0]
    )
    assert int((norm_only > 0).sum()) == 4  # LayerNorm over a row mixes that row only
