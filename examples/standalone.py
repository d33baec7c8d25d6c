"""perfkit in a plain PyTorch loop: @timed, section and timed_iter, then the report."""

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

import perfkit


class Shapes(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng(i)
        return torch.from_numpy(rng.random((1, 32, 32), dtype=np.float32)), torch.tensor(i % 2)


@perfkit.timed("collate")
def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.stack([img for img, _ in items])
    with perfkit.section("augment"):
        images = images + 0.05 * torch.randn_like(images)
    return images, torch.stack([label for _, label in items])


def main() -> None:
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Shapes(), batch_size=32, collate_fn=collate)
    for epoch in range(2):
        start = perfkit.cursor()
        with perfkit.section("epoch"):
            for images, labels in perfkit.timed_iter(loader, "train"):
                with perfkit.section("forward"):
                    loss = torch.nn.functional.cross_entropy(model(images), labels)
                with perfkit.section("backward"):
                    opt.zero_grad()
                    loss.backward()
                with perfkit.section("optimizer"):
                    opt.step()
        print(f"\n== epoch {epoch} ==\n{perfkit.report(perfkit.snapshot(since=start))}")


if __name__ == "__main__":
    main()
