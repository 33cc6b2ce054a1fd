"""Robust cosine (García-Castellanos et al.): Gaussian normalisation per dimension,
then cosine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from relbench.api import deferred_import, Similarity

torch = deferred_import("torch")


@dataclass
class RobustCosine(Similarity):
    """Robust cosine: each dimension standardised (minus its mean, over its standard
    deviation, no learned parameters) before the cosine, for inputs and anchors alike
    (García-Castellanos et al., "robust relative representation").

    Trades part of cosine's isometry invariance for invariance to translations and to
    any per-dimension rescaling (with permutations: the intertwiner groups of common
    activations).

    Parameters
    ----------
    statistics : "train" | "batch", default "train"
        Where the mean and standard deviation come from.

        ``train`` (default, inductive): fitted by ``fit`` on the bank's training
        embeddings (the runner fits each bank's copy on its training split; the relative
        decoder's adapter training refits its copy on the adapted training bank) and
        reused for every projection, inputs and anchors alike: the frozen-encoder
        reading of the authors' parameter-free BatchNorm at evaluation (running
        statistics of the training data). A row's projection depends on that row alone,
        so projecting one test row equals projecting it inside its split.

        ``batch`` (**transductive** when evaluating): computed on the rows passed
        together to one ``project`` call and applied to those rows and to the anchors
        (the poster's "Gaussian normalization with respect to a batch", i.e. a
        BatchNorm kept in training mode). Whoever projects a split at once makes every
        test row's features depend on the other test rows: the relative decoder projects
        a whole split at once (the source's test split when predicting), and training
        with an adapter projects every minibatch separately (per-minibatch statistics
        while training, per-split statistics when predicting). Never the default; it
        declares itself :meth:`transductive`, so the inductive protocol refuses it and
        only ``protocol: {evaluation: transductive}`` accepts it.
    eps : float, default 1e-5
        Added to the standard deviation (BatchNorm's default).
    """

    name: ClassVar[str] = "robust-cosine"
    invariances: ClassVar[frozenset[str]] = frozenset({"scale", "translation", "permutation"})
    statistics: Literal["train", "batch"] = "train"
    eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.statistics not in ("train", "batch"):
            raise ValueError(f"statistics must be 'train' or 'batch', got {self.statistics!r}")
        if self.eps <= 0:
            raise ValueError(f"eps must be positive, got {self.eps}")
        self._moments: tuple[torch.Tensor, torch.Tensor] | None = None  # fitted state

    @staticmethod
    def _moments_of(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return X.mean(dim=0, keepdim=True), X.std(dim=0, unbiased=False, keepdim=True)

    def transductive(self) -> bool:
        """``statistics: batch`` normalises with the statistics of the projected rows."""
        return self.statistics == "batch"

    def inductive_alternative(self) -> str:
        """The statistics of the bank's training (fit) split instead."""
        return "statistics: train"

    def fit(self, X: torch.Tensor) -> None:
        """Per-dimension mean and standard deviation of the training bank."""
        mu, sd = self._moments_of(X.detach())
        self._moments = (mu, sd)

    def project(self, X: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``n × k`` cosine between standardised rows and standardised anchors."""
        if self.statistics == "batch":
            mu, sd = self._moments_of(X)
        elif self._moments is None:
            raise RuntimeError("robust-cosine with statistics='train': call fit(X) on the bank before project()")
        else:
            mu, sd = (m.to(X.device, X.dtype) for m in self._moments)
        Xn = (X - mu) / (sd + self.eps)
        An = (A - mu) / (sd + self.eps)
        return torch.nn.functional.normalize(Xn, dim=1) @ torch.nn.functional.normalize(An, dim=1).T
