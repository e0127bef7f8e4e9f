"""DINO (Caron et al. 2021; beyond the ViT paper): self-distillation without labels. Over views t != s, the loss is
H(P_t, P_s), P_t = softmax((g_teacher(x_t) - c) / tau_t), log P_s = log_softmax(g_student(x_s) / tau_s): the teacher
an EMA of the student (momentum 0.996 -> 1), c a moving average of its outputs (centring), tau_t < tau_s sharpening
it. The training step (views, optimiser, schedules) is in `course.dino`."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from ..model import VisionTransformer
from .objective import soft_cross_entropy


class DINOHead(nn.Module):
    """The projection head g: an MLP (GELU), an L2-normalised bottleneck, then a weight-normalised linear layer to K
    prototypes without bias whose weight norms stay fixed at 1 (DINO's `norm_last_layer`)."""

    def __init__(self, dim: int, prototypes: int = 256, hidden: int = 256, bottleneck: int = 64, layers: int = 3):
        super().__init__()
        sizes = [dim] + [hidden] * (layers - 1) + [bottleneck]
        linears = [nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
        self.mlp = nn.Sequential(*[m for linear in linears[:-1] for m in (linear, nn.GELU())], linears[-1])
        for linear in linears:
            nn.init.trunc_normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)
        self.last = nn.utils.parametrizations.weight_norm(nn.Linear(bottleneck, prototypes, bias=False))
        self.last.parametrizations.weight.original0.data.fill_(1.0)  # the norm g of every prototype: 1
        self.last.parametrizations.weight.original0.requires_grad = False

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.last(F.normalize(self.mlp(y), dim=-1))


def dino_loss(
    student: list[torch.Tensor], teacher: list[torch.Tensor], centre: torch.Tensor, tau_s: float, tau_t: float
) -> torch.Tensor:
    """The mean over view pairs (i != j) of H(teacher's centred, sharpened P of view i, student's P of view j)."""
    targets = [F.softmax((t.detach() - centre) / tau_t, dim=-1) for t in teacher]
    terms = [
        soft_cross_entropy(s / tau_s, p).mean() for i, p in enumerate(targets) for j, s in enumerate(student) if i != j
    ]
    if not terms:
        raise ValueError("DINO needs at least two views: the teacher's view and another one for the student.")
    return torch.stack(terms).mean()


@torch.no_grad()
def updated_centre(centre: torch.Tensor, teacher: list[torch.Tensor], momentum: float = 0.9) -> torch.Tensor:
    """Centring (DINO eq. 4): c <- m c + (1 - m) * the mean of the teacher's outputs over the batch and its views."""
    return momentum * centre + (1 - momentum) * torch.cat(teacher).float().mean(0)


def teacher_momentum(step: int, total_steps: int, base: float = 0.996) -> float:
    """The teacher's EMA momentum, from `base` at step 0 to 1 at the last step along a half cosine."""
    return 1 - (1 - base) * (math.cos(math.pi * step / max(1, total_steps)) + 1) / 2


class DINO(nn.Module):
    """Student (ViT + head) and momentum teacher (a frozen copy). forward(views) -> (loss, teacher outputs), the first
    `n_global` views through the teacher; `centring=False` or tau_t = tau_s switch off a half of the recipe."""

    objective_name = "dino"

    def __init__(
        self,
        vit: VisionTransformer,
        prototypes: int = 256,
        tau_s: float = 0.1,
        tau_t: float = 0.04,
        centre_momentum: float = 0.9,
        centring: bool = True,
        n_global: int = 2,
        **head,
    ):
        super().__init__()
        self.student, self.student_head = vit, DINOHead(vit.config.dim, prototypes, **head)
        self.teacher, self.teacher_head = copy.deepcopy(self.student), copy.deepcopy(self.student_head)
        for p in self.teacher_parameters():
            p.requires_grad = False
        self.tau_s, self.tau_t, self.centre_momentum, self.centring = tau_s, tau_t, centre_momentum, centring
        self.n_global = n_global
        self.register_buffer("centre", torch.zeros(prototypes))

    def teacher_parameters(self) -> list[nn.Parameter]:
        return list(self.teacher.parameters()) + list(self.teacher_head.parameters())

    def student_parameters(self) -> list[nn.Parameter]:
        return list(self.student.parameters()) + list(self.student_head.parameters())

    def embed(self, net: VisionTransformer, head: DINOHead, views: list[torch.Tensor]) -> list[torch.Tensor]:
        """The head's outputs for each view, one forward pass over the views stacked."""
        y = net.forward_head(net.forward_features(torch.cat(views)), pre_logits=True)
        return list(head(y).split([len(v) for v in views]))

    def forward(self, views: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        with torch.no_grad():
            teacher = self.embed(self.teacher, self.teacher_head, views[: self.n_global])
        student = self.embed(self.student, self.student_head, views)
        loss = dino_loss(student, teacher, self.centre, self.tau_s, self.tau_t)
        if self.training and self.centring:
            self.centre.copy_(updated_centre(self.centre, teacher, self.centre_momentum))
        return loss, teacher

    @torch.no_grad()
    def update_teacher(self, momentum: float) -> None:
        """theta_t <- m theta_t + (1 - m) theta_s (after the student's optimizer step)."""
        torch._foreach_lerp_(self.teacher_parameters(), self.student_parameters(), 1 - momentum)
