"""Quickstart: a 3-component float64 number keeps what float64 alone rounds away."""

import torch

import hypermc as hm


def main() -> None:
    x = hm.mc(1.0, nc=3, dtype=torch.float64)
    y = x + 1e-30
    print("plain float64: (1 + 1e-30) - 1 =", (torch.tensor(1.0, dtype=torch.float64) + 1e-30) - 1.0)
    print("hypermc nc=3:  (1 + 1e-30) - 1 =", (y - 1.0).to_mpmath())
    print("components of 1 + 1e-30:", y.components)


if __name__ == "__main__":
    main()
