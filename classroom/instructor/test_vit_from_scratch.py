"""Visible tests for vit_from_scratch.py: run them with `python -m pytest test_vit_from_scratch.py`.

They check one small configuration (28x28 grey images, P = 4, D = 16, 2 heads). The grader runs more tests, on other
shapes and sizes and against vitlib's and timm's ViT with the same weights, so make your code general.
"""

import torch
import torch.nn.functional as F
from vit_from_scratch import EncoderBlock, MultiHeadSelfAttention, PatchEmbedding, VisionTransformer, patchify

B, C, H, W, P, D, HEADS = 2, 1, 28, 28, 4, 16, 2


def images(seed=0):
    return torch.randn(B, C, H, W, generator=torch.Generator().manual_seed(seed))


def reference_attention(attn, x):
    b, n, d = x.shape
    q, k, v = attn.qkv(x).reshape(b, n, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
    return attn.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d))


def test_patchify_shape_and_order():
    x = images()
    out = patchify(x, P)
    assert out is not None, "patchify returns nothing"
    assert tuple(out.shape) == (B, (H // P) * (W // P), P * P * C), f"expected (B, N, P*P*C), got {tuple(out.shape)}"
    grid_w = W // P
    for i in (0, 1, grid_w, 2 * grid_w + 3):  # row-major: patch i is at (i // grid_w, i % grid_w)
        r, c = divmod(i, grid_w)
        expected = x[:, :, r * P : (r + 1) * P, c * P : (c + 1) * P].permute(0, 2, 3, 1).reshape(B, -1)
        assert torch.equal(out[:, i], expected), f"patch {i} is not the pixels at grid row {r}, column {c}"


def test_patch_embedding_is_a_linear_map_of_the_patches():
    torch.manual_seed(0)
    embed = PatchEmbedding(H, P, C, D)
    x = images(1)
    with torch.no_grad():
        out = embed(x)
        expected = embed.proj(x.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1).reshape(B, -1, P * P * C))
    assert tuple(out.shape) == (B, (H // P) * (W // P), D)
    assert torch.allclose(out, expected, atol=1e-6), "the embeddings are not E applied to the flattened patches"


def test_attention_matches_scaled_dot_product_attention():
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(D, HEADS)
    x = torch.randn(B, 5, D)
    with torch.no_grad():
        out = attn(x)
        expected = reference_attention(attn, x)
    assert tuple(out.shape) == (B, 5, D)
    assert torch.allclose(out, expected, atol=1e-5), "MSA differs from softmax(q k^T / sqrt(D_h)) v per head"


def test_block_is_pre_ln_with_residuals():
    torch.manual_seed(0)
    block = EncoderBlock(D, HEADS, 2 * D)
    z = torch.randn(B, 5, D)
    with torch.no_grad():
        out = block(z)
        z1 = z + reference_attention(block.attn, block.norm1(z))
        expected = z1 + block.mlp(block.norm2(z1))
    assert torch.allclose(out, expected, atol=1e-5), "the block is not z' = MSA(LN(z)) + z, z'' = MLP(LN(z')) + z'"


def test_vit_logits():
    torch.manual_seed(0)
    model = VisionTransformer(
        image_size=H, patch_size=P, in_channels=C, num_classes=10, dim=D, depth=2, heads=HEADS, mlp_dim=2 * D
    ).eval()
    x = images(2)
    with torch.no_grad():
        out = model(x)
        z = model.patch_embed(x)
        z = torch.cat([model.cls_token.expand(B, -1, -1), z], dim=1) + model.pos_embed
        for block in model.blocks:
            z = block(z)
        expected = model.head(model.norm(z)[:, 0])
    assert tuple(out.shape) == (B, 10), f"expected logits (B, num_classes), got {tuple(out.shape)}"
    assert torch.allclose(out, expected, atol=1e-5), "the logits are not head(LN(z_L^0))"
