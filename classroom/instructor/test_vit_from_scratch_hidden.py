"""Hidden tests (instructor only): other shapes, seeds and sizes, rectangular images, and the same weights in
vitlib's and timm's ViT. An answer that only fits the visible tests fails here."""

import inspect
import re
from functools import partial

import pytest
import timm.models.vision_transformer as timm_vit
import torch
import vit_from_scratch as student
from torch import nn

import vitlib

SHAPES = [(1, 3, 32, 32, 8), (3, 3, 32, 48, 8), (2, 1, 28, 28, 7), (2, 2, 12, 20, 2), (1, 3, 224, 224, 16)]
ATTENTION = [(24, 3, 7), (32, 8, 1), (64, 1, 10), (48, 4, 17)]  # (dim, heads, tokens)


def randomize(module, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return module.eval()


def load(module, state_dict):
    module.load_state_dict(state_dict, strict=True)
    return module.eval()


@pytest.mark.parametrize("b,c,h,w,p", SHAPES)
def test_patchify_other_shapes(b, c, h, w, p):
    x = torch.randn(b, c, h, w, generator=torch.Generator().manual_seed(h * w + p))
    out = student.patchify(x, p)
    assert out is not None and torch.equal(out, vitlib.patchify(x, p)), f"patchify differs for {b}x{c}x{h}x{w}, P={p}"


@pytest.mark.parametrize("b,c,h,w,p", SHAPES[:4])
def test_patch_embedding_same_as_vitlib(b, c, h, w, p):
    torch.manual_seed(p)
    ref = randomize(vitlib.PatchEmbedding(image_size=(h, w), patch_size=p, in_channels=c, dim=12), seed=p)
    linear = {"proj.weight": ref.linear_weight(), "proj.bias": ref.proj.bias}  # vitlib keeps E as conv filters
    mine = load(student.PatchEmbedding((h, w), p, c, 12), linear)
    x = torch.randn(b, c, h, w)
    with torch.no_grad():
        assert torch.allclose(mine(x), ref(x), atol=1e-4), f"patch embeddings differ for {h}x{w}, P={p}, C={c}"


@pytest.mark.parametrize("dim,heads,n", ATTENTION)
def test_attention_same_as_vitlib_and_timm(dim, heads, n):
    ref = randomize(vitlib.MultiHeadSelfAttention(dim=dim, heads=heads), seed=dim + heads)
    mine = load(student.MultiHeadSelfAttention(dim, heads), ref.state_dict())
    timm_attn = load(timm_vit.Attention(dim, num_heads=heads, qkv_bias=True), ref.state_dict())
    x = torch.randn(2, n, dim, generator=torch.Generator().manual_seed(n))
    with torch.no_grad():
        out = mine(x)
        assert torch.allclose(out, ref(x), atol=1e-4), f"MSA differs from vitlib for D={dim}, {heads} heads, N={n}"
        assert torch.allclose(out, timm_attn(x), atol=1e-4), f"MSA differs from timm for D={dim}, {heads} heads, N={n}"


def test_attention_written_out():
    source = inspect.getsource(student.MultiHeadSelfAttention.forward)
    assert not re.search(r"(scaled_dot_product_attention|MultiheadAttention)\s*\(|\b(vitlib|timm)\.", source), (
        "write the softmax yourself: no scaled_dot_product_attention, nn.MultiheadAttention, vitlib or timm"
    )


@pytest.mark.parametrize("dim,heads,n", ATTENTION[:3])
def test_block_same_as_vitlib_and_timm(dim, heads, n):
    ref = randomize(vitlib.EncoderBlock(dim=dim, heads=heads, mlp_dim=3 * dim), seed=n)
    mine = load(student.EncoderBlock(dim, heads, 3 * dim), ref.state_dict())
    timm_block = load(
        timm_vit.Block(dim, heads, mlp_ratio=3.0, qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6)),
        ref.state_dict(),
    )
    z = torch.randn(3, n, dim, generator=torch.Generator().manual_seed(dim))
    with torch.no_grad():
        out = mine(z)
        assert torch.allclose(out, ref(z), atol=1e-4), f"the block differs from vitlib for D={dim}, {heads} heads"
        assert torch.allclose(out, timm_block(z), atol=1e-4), f"the block differs from timm for D={dim}, {heads} heads"


def student_state_from_timm(sd):
    """timm's ViT state dict in the student's layout (E as a Linear over (p1 p2 c) patches)."""
    out = {k: v for k, v in sd.items() if k.startswith(("blocks.", "norm.", "head.", "cls_token", "pos_embed"))}
    conv = sd["patch_embed.proj.weight"]  # (D, C, P, P)
    out["patch_embed.proj.weight"] = conv.permute(0, 2, 3, 1).reshape(conv.shape[0], -1)
    out["patch_embed.proj.bias"] = sd["patch_embed.proj.bias"]
    return out


@pytest.mark.parametrize(
    "h,w,p,c,dim,depth,heads", [(32, 32, 8, 3, 32, 2, 4), (24, 40, 4, 1, 24, 3, 3), (28, 28, 7, 1, 16, 1, 2)]
)
def test_vit_same_as_timm_and_vitlib(h, w, p, c, dim, depth, heads):
    timm_model = randomize(
        timm_vit.VisionTransformer(
            img_size=(h, w),
            patch_size=p,
            in_chans=c,
            num_classes=7,
            embed_dim=dim,
            depth=depth,
            num_heads=heads,
            mlp_ratio=2.0,
            qkv_bias=True,
        ),
        seed=h + w,
    )
    state = student_state_from_timm(timm_model.state_dict())
    mine = load(student.VisionTransformer((h, w), p, c, 7, dim, depth, heads, 2 * dim), state)
    options = dict(image_size=(h, w), patch_size=p, in_channels=c, num_classes=7, dim=dim, depth=depth, heads=heads)
    ref = load(vitlib.VisionTransformer(**options, mlp_dim=2 * dim), timm_model.state_dict())  # timm's names
    x = torch.randn(3, c, h, w, generator=torch.Generator().manual_seed(depth))
    with torch.no_grad():
        out = mine(x)
        assert tuple(out.shape) == (3, 7), f"expected logits (3, 7), got {tuple(out.shape)}"
        assert torch.allclose(out, timm_model(x), atol=1e-3), f"logits differ from timm's ViT for {h}x{w}, P={p}"
        assert torch.allclose(out, ref(x), atol=1e-3), f"logits differ from vitlib's ViT for {h}x{w}, P={p}"


def test_vit_batch_of_one_and_no_vitlib_or_timm():
    model = randomize(student.VisionTransformer(), seed=5)
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad():
        assert torch.allclose(model(x[:1]), model(x)[:1], atol=1e-5), (
            "an image's logits depend on the rest of the batch"
        )
    source = inspect.getsource(student)
    assert not re.search(r"^\s*(import|from)\s+(vitlib|timm)", source, re.M), (
        "vit_from_scratch.py must not import vitlib or timm"
    )
