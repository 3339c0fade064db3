"""A small audio-style stack of Conv1d layers (rank-3 tensors, N × C × L).

    audio 1×1×512 ─ Conv1d(1→8, k 16, s 8) ─ ReLU ─ Conv1d(8→16, k 3) ─ ReLU ─ Conv1d(16→4, k 3)

The layout of Silero VAD's STFT-as-convolution and encoder: the INT8 levers written
for Conv2d (reduce_range's im2col, bias correction's ReduceMean, equalization's weight
axes) raised on it (issue 40, item 5). Seeded weights; the two ReLU-joined pairs are
what cross-layer equalization scales.
"""

import torch


class Conv1dStack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.Sequential(
            torch.nn.Conv1d(1, 8, 16, stride=8), torch.nn.ReLU(),
            torch.nn.Conv1d(8, 16, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv1d(16, 4, 3, padding=1))
        with torch.no_grad():  # uneven channel ranges: something for CLE to equalize
            self.layers[0].weight.mul_(torch.linspace(0.1, 4.0, 8)[:, None, None])

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        return self.layers(audio)


def build() -> torch.nn.Module:
    return Conv1dStack().eval()


def audio(count: int = 8, seed: int = 0) -> "torch.Tensor":
    """Noisy sine bursts, count × 1 × 512, in -1..1."""
    generator = torch.Generator().manual_seed(seed)
    t = torch.arange(512) / 16000.0
    rows = [torch.sin(2 * torch.pi * (200 + 100 * i) * t) * (0.2 + 0.1 * i)
            + 0.05 * torch.randn(512, generator=generator) for i in range(count)]
    return torch.stack(rows)[:, None].clamp(-1, 1)
