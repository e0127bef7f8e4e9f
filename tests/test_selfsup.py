import pytest
import torch

from vitlib import VisionTransformer
from vitlib.objectives import MAE, MaskedPatchPrediction, corruption_plan, mean_colour_targets, random_masking


def vit(**kw):
    torch.manual_seed(0)
    return VisionTransformer(
        **{
            **dict(image_size=8, patch_size=4, in_channels=3, num_classes=10, dim=32, depth=2, heads=2, mlp_dim=64),
            **kw,
        }
    )


def test_mean_colour_targets_quantise_each_channel_to_3_bits():
    img = torch.zeros(1, 3, 8, 8)
    img[:, 0, :4, :4] = 1.0  # patch 0: red at full
    img[:, 2, :4, 4:] = 0.3  # patch 1: blue at 0.3 -> level 2
    t = mean_colour_targets(img, 4)
    assert t.tolist() == [[7 * 64, 2, 0, 0]]
    gray = mean_colour_targets(torch.full((1, 1, 8, 8), 0.99), 4)
    assert gray.tolist() == [[7, 7, 7, 7]]


def test_corruption_plan_shares():
    corrupted, kind = corruption_plan(400, 50, generator=torch.Generator().manual_seed(0))
    assert torch.all(corrupted.sum(1) == 25)  # exactly 50% of the patches per image
    assert torch.all((kind > 0) == corrupted)
    shares = torch.bincount(kind[corrupted].long(), minlength=4)[1:].double() / corrupted.sum()
    assert shares.tolist() == pytest.approx([0.8, 0.1, 0.1], abs=0.01)


def test_masked_patch_prediction_corrupts_only_chosen_patches():
    obj = MaskedPatchPrediction(vit())
    x = torch.randn(2, 4, 32)
    out, corrupted = obj.corrupt(x, torch.Generator().manual_seed(0))
    assert torch.equal(out[~corrupted], x[~corrupted])
    replaced = (out == obj.mask_token[0, 0]).all(-1)
    assert replaced.any() and torch.all(corrupted[replaced])
    loss, acc = obj(torch.rand(2, 3, 8, 8))
    assert loss.ndim == 0 and loss.item() == pytest.approx(torch.log(torch.tensor(512.0)).item(), rel=0.3)
    loss.backward()
    assert obj.mask_token.grad is not None and obj.vit.blocks[0].attn.qkv.weight.grad is not None


def test_masked_patch_prediction_rejects_bad_shares():
    with pytest.raises(ValueError, match="mask \\+ random"):
        MaskedPatchPrediction(vit(), mask=0.9, random=0.2)


def test_random_masking_keeps_a_quarter_in_order():
    keep, mask = random_masking(3, 16, 0.75, torch.Generator().manual_seed(0))
    assert keep.shape == (3, 4) and torch.all(keep[:, 1:] > keep[:, :-1])
    assert torch.all(mask.sum(1) == 12) and not mask.gather(1, keep).any()


def test_mae_encoder_sees_only_visible_patches():
    mae = MAE(vit(image_size=16), ratio=0.75)
    images = torch.randn(2, 3, 16, 16)
    keep, _ = random_masking(2, 16, 0.75, torch.Generator().manual_seed(0))
    latent = mae.encode(images, keep)
    assert latent.shape == (2, 1 + 4, 32)
    # changing a hidden patch does not change the encoding
    hidden = next(i for i in range(16) if i not in keep[0].tolist())
    r, c = divmod(hidden, 4)
    changed = images.clone()
    changed[0, :, 4 * r : 4 * r + 4, 4 * c : 4 * c + 4] += 5
    assert torch.allclose(mae.encode(changed, keep)[0], latent[0], atol=1e-6)


def test_mae_loss_reconstruction_and_errors():
    mae = MAE(vit(image_size=16))
    images = torch.randn(2, 3, 16, 16)
    loss, pred, mask = mae(images, torch.Generator().manual_seed(0))
    assert pred.shape == (2, 16, 48) and mask.sum() == 24 and loss.item() > 0
    masked, recon, pasted = mae.reconstruct(images, torch.Generator().manual_seed(0))
    assert masked.shape == recon.shape == pasted.shape == images.shape
    visible = ~mask[0].view(4, 4).repeat_interleave(4, 0).repeat_interleave(4, 1)
    assert torch.allclose(pasted[0][:, visible], images[0][:, visible])
    with pytest.raises(ValueError, match="absolute"):
        MAE(vit(pos_embed="none"))
    with pytest.raises(ValueError, match="mask ratio"):
        MAE(vit(), ratio=1.0)
