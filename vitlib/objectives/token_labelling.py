"""Token labelling (Jiang et al. 2021, LV-ViT; beyond the ViT paper): L = CE(head(z_L^0), y) + beta * (1/N) sum_i
softCE(token_head(z_L^i), t_i), beta = 0.5, each patch token's soft target t_i read off a frozen CNN teacher's class
activation map (its classifier per location, pooled to the patch grid, softmaxed with a temperature)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model import VisionTransformer
from .objective import StepLoss, soft_cross_entropy


def dense_scores(cnn: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """A small ResNet's class scores per location of its feature map (B, K, h, w): its classifier before pooling."""
    feats = cnn.blocks(cnn.stem(images))  # (B, C, h, w)
    return torch.einsum("bchw,kc->bkhw", feats, cnn.head.weight) + cnn.head.bias[None, :, None, None]


def token_targets(scores: torch.Tensor, grid: tuple[int, int], temperature: float = 1.0) -> torch.Tensor:
    """Dense scores (B, K, h, w) -> soft targets (B, N, K) in patch order: softmax(each patch's mean score / T)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}.")
    pooled = F.adaptive_avg_pool2d(scores.float(), grid)  # (B, K, gh, gw)
    return (pooled.flatten(2).transpose(1, 2) / temperature).softmax(-1)


def token_loss(token_logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The token-labelling term per image: the mean over the N tokens of softCE(token_logits_i, t_i), (B,)."""
    return soft_cross_entropy(token_logits, targets).mean(-1)


class TokenLabelling(nn.Module):
    """Wraps a classifier ViT and a frozen CNN teacher. forward(images) -> the [class] logits; forward(images, labels)
    -> StepLoss with, in training, loss = CE([class], y) + beta * token loss + kd * softCE([class], the teacher's
    global soft prediction), in evaluation CE([class], y) alone. beta = kd = 0: plain classification; kd > 0 with
    beta = 0: knowledge distillation, the control. `shared_head`: the ViT's own head scores the tokens."""

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
        self.vit, self.teacher = vit, teacher.eval().requires_grad_(False)
        self.beta, self.temperature, self.kd, self.shared_head = beta, temperature, kd, shared_head
        self.token_head = None if shared_head else nn.Linear(vit.config.dim, vit.config.num_classes)
        if self.token_head is not None:  # zero-initialised like the [class] head (section 3.2)
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
        """The loss's parts per image (B,): 'class', 'token', 'kd' (zero at weight 0), 'total'; and the 'logits'."""
        z = self.vit.forward_features(images)
        logits = self.vit.forward_head(z).float()
        parts = {"class": F.cross_entropy(logits, labels, reduction="none")}
        parts["token"] = parts["kd"] = torch.zeros_like(parts["class"])
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
