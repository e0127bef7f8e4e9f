"""Multi-head self-attention (appendix A, eq. 5-8), relative attention (appendix D.4) and the encoder block
(eq. 2-3)."""

import pytest
import torch
from torch import nn

from vitlib import EncoderBlock, MultiHeadSelfAttention, VisionTransformer, build_vit, record_attention
from vitlib.model import PostNormEncoderBlock, RelativeAttention, RelativePosition, ViTConfig

B, N, DIM, HEADS = 2, 7, 32, 4


def close(a, b, tol=1e-5):
    torch.testing.assert_close(a, b, atol=tol, rtol=tol)


@pytest.fixture
def x():
    return torch.randn(B, N, DIM)


def attention(relative: bool = False, **options) -> MultiHeadSelfAttention:
    if relative:
        return RelativeAttention(dim=DIM, heads=HEADS, num_tokens=N, **options)
    return MultiHeadSelfAttention(dim=DIM, heads=HEADS, **options)


@pytest.mark.parametrize("relative", [False, True])
def test_fused_and_manual_paths_agree(x, relative, randomise):
    attn = attention(relative).eval()
    if relative:
        randomise(attn.rel_pos)  # the 0.02-scaled initial table would barely move the logits
    unfused = attention(relative, fused=False)
    unfused.eval().load_state_dict(attn.state_dict())
    with record_attention(attn) as weights:  # the written-out path, keeping the weights
        out = attn(x)
    assert len(weights) == 1 and weights[0].shape == (B, HEADS, N, N)
    assert attn.recorded is None  # recording ends with the block
    close(attn(x), out)
    close(unfused(x), out)


def test_equals_torch_multihead_attention(x):
    attn = MultiHeadSelfAttention(dim=DIM, heads=HEADS).eval()
    ref = nn.MultiheadAttention(DIM, HEADS, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(attn.qkv.weight)
        ref.in_proj_bias.copy_(attn.qkv.bias)
        ref.out_proj.weight.copy_(attn.proj.weight)
        ref.out_proj.bias.copy_(attn.proj.bias)
    ref_out, ref_weights = ref(x, x, x, need_weights=True, average_attn_weights=False)
    with record_attention(attn) as weights:
        out = attn(x)
    close(out, ref_out)
    close(weights[0], ref_weights)
    close(attn(x), ref_out)


def test_weights_are_a_softmax_over_keys(x):
    attn = MultiHeadSelfAttention(dim=DIM, heads=HEADS)
    with record_attention(attn) as recorded:
        attn(x)
    weights = recorded[0]
    assert (weights >= 0).all()
    close(weights.sum(-1), torch.ones(B, HEADS, N))


def test_relative_bias_is_q_dot_the_offset_embedding(x, randomise):
    head_dim = DIM // HEADS
    rel = randomise(RelativePosition(num_tokens=N, head_dim=head_dim))
    q = torch.randn(B, HEADS, N, head_dim)
    bias = rel(q)
    i, j = 5, 2
    close(bias[:, :, i, j], q[:, :, i] @ rel.table[i - j + N - 1])
    close(bias[:, :, j, i], q[:, :, j] @ rel.table[j - i + N - 1])
    with pytest.raises(ValueError, match=f"built for {N} tokens, got {N + 1}"):
        rel(torch.randn(B, HEADS, N + 1, head_dim))


@pytest.mark.parametrize("fused", [True, False])
def test_relative_attention_changes_the_output(x, fused, randomise):
    attn = attention(True, fused=fused).eval()
    randomise(attn.rel_pos)
    plain = MultiHeadSelfAttention(dim=DIM, heads=HEADS, fused=fused).eval()
    plain.load_state_dict(attn.state_dict(), strict=False)
    assert not torch.allclose(attn(x), plain(x), atol=1e-3)
    with torch.no_grad():
        attn.rel_pos.table.zero_()
    close(attn(x), plain(x))


def test_width_not_divisible_by_heads_is_an_error():
    with pytest.raises(ValueError, match="dim=30 is not divisible by heads=4"):
        MultiHeadSelfAttention(dim=30, heads=4)
    with pytest.raises(ValueError, match="not divisible"):
        VisionTransformer(dim=30, heads=4)


def _random_block(randomise, **kwargs) -> EncoderBlock:
    block = EncoderBlock(dim=DIM, heads=HEADS, mlp_dim=64, **kwargs).eval()
    for norm in (block.norm1, block.norm2):  # LayerNorm starts as the identity affine map; make it count
        randomise(norm)
    return block


def test_pre_ln_block_follows_eq_2_and_3(x, randomise):
    block = _random_block(randomise)
    z1 = x + block.attn(block.norm1(x))  # z'_l = MSA(LN(z_{l-1})) + z_{l-1}
    z2 = z1 + block.mlp(block.norm2(z1))  # z_l = MLP(LN(z'_l)) + z'_l
    close(block(x), z2)
    with record_attention(block) as weights:
        close(block(x), z2)  # written out
    assert len(weights) == 1 and weights[0].shape == (B, HEADS, N, N)


def test_post_ln_block_normalises_after_each_residual(x, randomise):
    pre = _random_block(randomise)
    post = PostNormEncoderBlock(dim=DIM, heads=HEADS, mlp_dim=64).eval()
    post.load_state_dict(pre.state_dict())
    z1 = post.norm1(x + post.attn(x))
    close(post(x), post.norm2(z1 + post.mlp(z1)))
    assert not torch.allclose(pre(x), post(x), atol=1e-3)
    small = dict(image_size=8, patch_size=4, dim=DIM, heads=HEADS, depth=2, mlp_dim=64)
    assert all(type(b) is EncoderBlock for b in VisionTransformer(**small).blocks)
    assert all(type(b) is PostNormEncoderBlock for b in build_vit(ViTConfig(**small, norm_first=False)).blocks)


def test_the_model_modules_take_keywords_only():
    calls = [
        lambda: MultiHeadSelfAttention(DIM, HEADS),
        lambda: EncoderBlock(DIM, HEADS, 64),
        lambda: PostNormEncoderBlock(DIM, HEADS, 64),
        lambda: RelativePosition(N, DIM // HEADS),
        lambda: RelativeAttention(N, dim=DIM, heads=HEADS),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="positional"):
            call()
