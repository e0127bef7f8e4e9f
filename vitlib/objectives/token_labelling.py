"""Token labelling (Jiang et al. 2021, "All Tokens Matter: Token Labeling for Training Better Vision Transformers",
LV-ViT; the seeds' pointer, beyond the ViT paper): besides the [class] output's cross-entropy with the image's label,
every patch token i gets its own K-class soft target t_i, a "location-specific" label read off a teacher's dense
score map, and a loss of its own:

    L = CE(head(z_L^0), y) + beta * (1/N) sum_i softCE(token_head(z_L^i), t_i),   beta = 0.5 in the paper.

The teacher here is a small CNN made fully convolutional: its linear classifier applied as a 1x1 convolution to the
feature map before global pooling gives class scores per location (a class activation map); pooled to the ViT's
patch grid and softmaxed with a temperature, they are the token targets. The teacher is frozen and deterministic, so
computing the targets at every step equals computing them once per image (and stays aligned with any crop)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model import VisionTransformer
from .objective import StepLoss, soft_cross_entropy


def dense_scores(cnn: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """A small ResNet's class scores at every location of its last feature map, (B, K, h, w): the classifier as a
    1x1 convolution before global average pooling, so that their mean over locations is cnn(images)."""
    feats = cnn.blocks(cnn.stem(images))  # (B, C, h, w)
    return torch.einsum("bchw,kc->bkhw", feats, cnn.head.weight) + cnn.head.bias[None, :, None, None]


def token_targets(scores: torch.Tensor, grid: tuple[int, int], temperature: float = 1.0) -> torch.Tensor:
    """Dense scores (B, K, h, w) -> one soft target per patch token, (B, N, K), in the ViT's patch order (row by row):
    the scores averaged over each patch's area of the image, then softmax(scores / temperature)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}.")
    pooled = F.adaptive_avg_pool2d(scores.float(), grid)  # (B, K, gh, gw)
    return (pooled.flatten(2).transpose(1, 2) / temperature).softmax(-1)


def token_loss(token_logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The token-labelling term per image: the mean over the N tokens of softCE(token_logits_i, t_i), (B,)."""
    return soft_cross_entropy(token_logits, targets).mean(-1)


class TokenLabelling(nn.Module):
    """Wraps a classifier ViT and a frozen CNN teacher. forward(images) -> the [class] logits (B, K);
    forward(images, labels) -> StepLoss(loss, correct, logits) with, in training mode,
    loss = CE([class], y) + beta * token loss + kd * softCE([class], softmax(teacher's global scores / temperature)),
    and in evaluation mode CE([class], y) alone (the same test loss whatever the weights).

    beta = kd = 0 is the plain [class]-only classification loss (the teacher is then not even run); kd > 0 with
    beta = 0 distils the same teacher into the [class] output only (knowledge distillation, the control that
    isolates the token-level part). `shared_head`: score the tokens with the ViT's own head instead of a second
    linear head (LV-ViT's code uses a second one)."""

    objective_name = "token"  # what vitlib.objectives trains it with

    def __init__(
        self,
        vit: VisionTransformer,
        teacher: nn.Module,
        beta: float = 0.5,
        temperature: float = 1.0,
        kd: float = 0.0,
        shared_head: bool = False,
    ):
        super().__init__()
        if beta < 0 or kd < 0 or temperature <= 0:
            raise ValueError(f"need beta >= 0, kd >= 0, temperature > 0; got {beta}, {kd}, {temperature}.")
        if vit.config.num_classes < 2 or vit.config.hybrid:
            raise ValueError("token labelling needs a pure ViT classifier (num_classes >= 2, not a hybrid).")
        self.vit, self.teacher = vit, teacher.eval()
        self.teacher.requires_grad_(False)
        self.beta, self.temperature, self.kd, self.shared_head = beta, temperature, kd, shared_head
        self.token_head = None
        if not shared_head:  # zero-initialised like the [class] head (section 3.2): no draw from the random stream
            self.token_head = nn.Linear(vit.config.dim, vit.config.num_classes)
            nn.init.zeros_(self.token_head.weight)
            nn.init.zeros_(self.token_head.bias)

    def train(self, mode: bool = True):
        """Train or evaluate the ViT; the teacher stays in evaluation mode (BatchNorm's running statistics)."""
        super().train(mode)
        self.teacher.eval()
        return self

    @torch.no_grad()
    def teacher_targets(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(token targets (B, N, K), the teacher's global soft prediction (B, K)), both at the temperature."""
        scores = dense_scores(self.teacher, images).float()
        grid = self.vit.patch_embed.grid
        return token_targets(scores, grid, self.temperature), (scores.mean((2, 3)) / self.temperature).softmax(-1)

    def losses(self, images: torch.Tensor, labels: torch.Tensor) -> dict:
        """The loss's parts per image, (B,) each: 'class', 'token', 'kd' (zero when their weight is 0), 'total';
        and the [class] 'logits' (B, K)."""
        z = self.vit.forward_features(images)
        logits = self.vit.forward_head(z).float()
        parts = {"class": F.cross_entropy(logits, labels, reduction="none")}
        zero = torch.zeros_like(parts["class"])
        parts["token"], parts["kd"] = zero, zero
        if self.beta or self.kd:
            tokens, global_target = self.teacher_targets(images)
            if self.beta:
                patches = z[:, self.vit.num_prefix_tokens :]
                scores = self.vit.head(self.vit.pre_logits(patches)) if self.shared_head else self.token_head(patches)
                parts["token"] = token_loss(scores, tokens)
            if self.kd:
                parts["kd"] = soft_cross_entropy(logits, global_target)
        parts["total"] = parts["class"] + self.beta * parts["token"] + self.kd * parts["kd"]
        return {**parts, "logits": logits}

    def forward(self, images: torch.Tensor, labels: torch.Tensor | None = None, reduction: str = "mean"):
        if labels is None:
            return self.vit(images)
        if labels.ndim != 1:
            raise ValueError("token labelling takes class indices as labels (mixup / cutmix would need MixToken).")
        if self.training:
            parts = self.losses(images, labels)
            loss, logits = parts["total"], parts["logits"]
        else:  # evaluation: the [class] cross-entropy alone, one measure for every beta and kd (no teacher run)
            logits = self.vit(images).float()
            loss = F.cross_entropy(logits, labels, reduction="none")
        loss = loss.sum() if reduction == "sum" else loss.mean()
        return StepLoss(loss, (logits.argmax(1) == labels).sum(), logits)
