"""relbench built-in data set plugins: image, text, parallel-text and emoji data sets that
install without a model hub, plus any ``datasets.load_dataset`` source and the Planetoid
citation graphs (read from their files, downloaded where a URL is reachable)."""

from relbench.api import hookimpl
from relbench_datasets.bible import BibleEnEs
from relbench_datasets.digits import Digits
from relbench_datasets.emoji_set import Emoji
from relbench_datasets.fashion_mnist import FashionMNIST
from relbench_datasets.hf import HFDataset
from relbench_datasets.mnist import MNIST
from relbench_datasets.planetoid import Planetoid
from relbench_datasets.rotten_tomatoes import RottenTomatoes
from relbench_datasets.ui_strings import UIStrings

DATASETS = [HFDataset, FashionMNIST, MNIST, Digits, RottenTomatoes, BibleEnEs, UIStrings, Emoji, Planetoid]


@hookimpl
def relbench_datasets():
    """Every built-in data set class."""
    return list(DATASETS)
