"""The stitching page's sections that read what rows carry besides scores."""

from __future__ import annotations

import pandas as pd

from relbench_stitching.sections import encoder_report_section


def test_the_encoder_reports_columns_do_not_depend_on_the_order_a_record_kept():
    """A release's flat table sorts its columns, so a report taken from it by `run --reuse`
    holds its keys in another order than the run wrote them: the page must not change."""
    written = {"mlp": {"epochs": 5, "train_accuracy": 0.88, "test_accuracy": 0.84}}
    reused = {"mlp": {"epochs": 5, "test_accuracy": 0.84, "train_accuracy": 0.88}}
    pages = [encoder_report_section(pd.DataFrame({"extra": [{"encoder_reports": r}]})) for r in (written, reused)]
    assert pages[0] == pages[1]
    header = next(line for line in pages[0].splitlines() if line.startswith("| encoder"))
    assert [c.strip() for c in header.strip("|").split("|")] == ["encoder", "epochs", "test accuracy",
                                                                   "train accuracy"]
    assert encoder_report_section(pd.DataFrame({"extra": [{}]})) == ""
